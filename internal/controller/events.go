package controller

import (
	"context"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/events"
	"github.com/paddock-dev/paddock/internal/store"
)

// Subscribe starts following the sandboxes ctx's caller may see and
// returns them as they are now: a change made after the list was read is
// also delivered, so nothing falls between the two. With usage, the
// subscription also gets a usage sample of them every api.UsageInterval
// (internal/controller/events).
func (c *Controller) Subscribe(ctx context.Context, usage bool) (*events.Subscription, []api.Sandbox, error) {
	s := c.events.Subscribe(func(owner string) bool { return visible(ctx, owner) }, usage)
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
	if !c.events.Active() {
		return
	}
	// The caller holds the sandbox's own lock, so its changes arrive in
	// order.
	c.events.Publish(api.Event{Type: api.StreamSandbox, Sandbox: c.toAPI(rec), From: from, To: to, Reason: reason, At: time.Now().UTC()}, rec.KeyID)
}

// usageSource is what the event streams' usage sampler reads: the
// running and paused sandboxes, and each one's usage from its runtime
// (usage.go).
func (c *Controller) usageSource() events.UsageSource {
	return events.UsageSource{
		Live: func(ctx context.Context) ([]events.Sandbox, error) {
			recs, err := c.opts.Store.ListSandboxes(ctx, nil)
			if err != nil {
				return nil, err
			}
			var live []events.Sandbox
			for _, r := range recs {
				if r.State == api.StateRunning || r.State == api.StatePaused {
					live = append(live, events.Sandbox{ID: r.ID, Runtime: r.Runtime, Owner: r.KeyID})
				}
			}
			return live, nil
		},
		Read: c.readUsage,
		Log:  c.log,
		Done: c.closing,
	}
}
