// Package events fans sandbox changes and usage samples out to the
// daemon's event streams (GET /v1/events, which the console follows). It
// sits beneath the controller: the controller publishes each change of a
// sandbox to its Hub and subscribes a stream with the test of what the
// stream's caller may see; the hub knows nothing of callers or records.
package events

import (
	"sync"

	"github.com/paddock-dev/paddock/api"
)

// Buffer is how many events a subscriber may fall behind by before it is
// cut off (it reconnects and syncs again); a burst of 100 creates makes
// about 300.
const Buffer = 1024

// Hub is the set of subscriptions. Its zero value is ready; usage samples
// need SetUsageSource first.
type Hub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
	feed usageFeed // usage.go
}

// Subscription is one event stream's view: the events about sandboxes
// its caller may see, from the moment it was made.
type Subscription struct {
	hub    *Hub
	may    func(owner string) bool
	ch     chan api.Event
	lagged chan struct{}
	once   sync.Once
	usage  bool // also sent the usage samples
}

// Events delivers the events in order.
func (s *Subscription) Events() <-chan api.Event { return s.ch }

// Lagged is closed when the subscriber fell Buffer events behind; no more
// events come after it.
func (s *Subscription) Lagged() <-chan struct{} { return s.lagged }

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
}

// Subscribe adds a subscription that gets the events about sandboxes
// whose owner may says it may see; with usage, also a usage sample of
// them every api.UsageInterval (the sampler runs while one such
// subscription does).
func (h *Hub) Subscribe(may func(owner string) bool, usage bool) *Subscription {
	s := &Subscription{hub: h, may: may, ch: make(chan api.Event, Buffer), lagged: make(chan struct{}), usage: usage}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*Subscription]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	if usage {
		h.wantsUsage()
	}
	return s
}

// Active says whether anyone subscribes, so that a publisher can skip
// building an event nobody reads.
func (h *Hub) Active() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

// Publish sends ev, an event about a sandbox of owner, to every
// subscription that may see it. Events published one after another (the
// controller does so under the sandbox's own lock) arrive in that order.
func (h *Hub) Publish(ev api.Event, owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.may(owner) {
			h.deliver(s, ev)
		}
	}
}

// deliver queues ev for s, or cuts s off when it is too far behind.
// Under h.mu.
func (h *Hub) deliver(s *Subscription, ev api.Event) {
	select {
	case s.ch <- ev:
	default:
		delete(h.subs, s)
		s.once.Do(func() { close(s.lagged) })
	}
}
