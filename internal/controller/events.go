package controller

import (
	"context"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/store"
)

// eventBuffer is how many changes a subscriber may fall behind by before
// it is cut off (it reconnects and syncs again); a burst of 100 creates
// makes about 300.
const eventBuffer = 1024

// eventHub fans sandbox changes out to the event streams (GET /v1/events).
type eventHub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// Subscription is one event stream's view: the changes of the sandboxes
// its caller may see, from the moment it was made.
type Subscription struct {
	hub    *eventHub
	ctx    context.Context // the caller, for visibility
	ch     chan api.Event
	lagged chan struct{}
	once   sync.Once
	usage  bool // also sent the usage samples (usagefeed.go)
}

// Events delivers the changes in order.
func (s *Subscription) Events() <-chan api.Event { return s.ch }

// Lagged is closed when the subscriber fell eventBuffer changes behind;
// no more events come after it.
func (s *Subscription) Lagged() <-chan struct{} { return s.lagged }

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
}

// Subscribe starts following the sandboxes ctx's caller may see and
// returns them as they are now: a change made after the list was read is
// also delivered, so nothing falls between the two. With usage, the
// subscription also gets a usage sample of them every api.UsageInterval.
func (c *Controller) Subscribe(ctx context.Context, usage bool) (*Subscription, []api.Sandbox, error) {
	s := &Subscription{hub: &c.events, ctx: ctx, ch: make(chan api.Event, eventBuffer), lagged: make(chan struct{}), usage: usage}
	c.events.mu.Lock()
	if c.events.subs == nil {
		c.events.subs = map[*Subscription]struct{}{}
	}
	c.events.subs[s] = struct{}{}
	c.events.mu.Unlock()
	if usage {
		c.wantsUsage()
	}
	list, err := c.List(ctx, nil)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, list, nil
}

// changed tells the event streams that rec changed (from and to name a
// state change; both empty for any other change).
func (c *Controller) changed(rec *store.Sandbox, from, to, reason string) {
	c.events.mu.Lock()
	n := len(c.events.subs)
	c.events.mu.Unlock()
	if n == 0 {
		return
	}
	// Built outside the hub's lock: toAPI takes other locks. The caller
	// holds the sandbox's own lock, so its changes arrive in order.
	ev := api.Event{Type: api.StreamSandbox, Sandbox: c.toAPI(rec), From: from, To: to, Reason: reason, At: time.Now().UTC()}
	c.events.mu.Lock()
	defer c.events.mu.Unlock()
	for s := range c.events.subs {
		if visible(s.ctx, rec.KeyID) {
			c.events.deliver(s, ev)
		}
	}
}

// deliver queues ev for s, or cuts s off when it is too far behind.
// Under the hub's lock.
func (h *eventHub) deliver(s *Subscription, ev api.Event) {
	select {
	case s.ch <- ev:
	default:
		delete(h.subs, s)
		s.once.Do(func() { close(s.lagged) })
	}
}
