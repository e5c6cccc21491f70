package controller

import (
	"context"
	"fmt"
	"time"
)

// lifetimeLoop ends each sandbox at the end of its hard lifetime. It
// sleeps until the nearest end rather than polling with the idle check,
// so a sandbox given 5 s ends at 5 s, not at the next check after it
// (E2B's setTimeout is held to that). Creates and SetTimeout wake it to
// look again; it also looks every IdleInterval, for lifetimes set by
// paths that do not wake it.
func (c *Controller) lifetimeLoop() {
	defer close(c.lifetimeDone)
	t := time.NewTimer(0)
	defer t.Stop()
	retry := map[string]time.Time{} // failed destroys wait a round
	for {
		select {
		case <-c.stopIdle:
			return
		case <-c.lifetimeWake:
		case <-t.C:
		}
		next := c.endLifetimes(System(context.Background()), retry)
		t.Reset(next)
	}
}

// wakeLifetimes tells the lifetime loop that a lifetime changed.
func (c *Controller) wakeLifetimes() {
	select {
	case c.lifetimeWake <- struct{}{}:
	default: // a wake is pending already
	}
}

// endLifetimes destroys the sandboxes whose lifetime has ended and returns
// how long to sleep until the next end (at most IdleInterval).
func (c *Controller) endLifetimes(ctx context.Context, retry map[string]time.Time) time.Duration {
	wait := c.opts.IdleInterval
	recs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		c.log.Error("lifetime check", "err", err)
		return wait
	}
	now := time.Now()
	for id, at := range retry {
		if now.After(at) {
			delete(retry, id)
		}
	}
	for _, r := range recs {
		if r.Timeout <= 0 {
			continue
		}
		end := r.CreatedAt.Add(r.Timeout)
		if left := end.Sub(now); left > 0 {
			wait = min(wait, left)
			continue
		}
		if _, failed := retry[r.ID]; failed {
			continue
		}
		if err := c.destroy(ctx, r.ID, fmt.Sprintf("lifetime of %s reached", r.Timeout.Round(time.Millisecond))); err != nil {
			c.log.Error("destroy at end of lifetime", "sandbox", r.ID, "err", err)
			retry[r.ID] = time.Now().Add(c.opts.IdleInterval)
		}
	}
	return wait
}
