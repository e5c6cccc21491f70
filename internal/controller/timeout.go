package controller

import (
	"context"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// maxLifetime matches parseDuration's upper bound for "timeout".
const maxLifetime = 365 * 24 * time.Hour

// SetTimeout makes a sandbox's hard lifetime end d from now, extending or
// shortening it (E2B's setTimeout). The lifetime is stored relative to the
// creation time, so it becomes the age the sandbox will have then.
func (c *Controller) SetTimeout(ctx context.Context, ref string, d time.Duration) (*api.Sandbox, error) {
	if d < time.Second || d > maxLifetime {
		return nil, errdefs.Invalid("timeout %s is out of range (1s to %s)", d, maxLifetime)
	}
	rec, _, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	lifetime := time.Since(rec.CreatedAt) + d
	if lifetime > maxLifetime {
		return nil, errdefs.Invalid("timeout %s would make the sandbox's lifetime longer than %s", d, maxLifetime)
	}
	// Milliseconds, not seconds: a rounded lifetime would end up to half a
	// second early or late.
	rec.Timeout = lifetime.Round(time.Millisecond)
	if err := c.opts.Store.UpdateSandbox(context.WithoutCancel(ctx), rec); err != nil {
		return nil, err
	}
	c.wakeLifetimes() // lifetime.go
	c.touch(rec.ID)
	return c.toAPI(rec), nil
}

// SetSleepAfter changes how long a sandbox may idle before its idle policy
// acts (E2B's setTimeout on an auto-pausing sandbox).
func (c *Controller) SetSleepAfter(ctx context.Context, ref string, d time.Duration) (*api.Sandbox, error) {
	if d < time.Second || d > maxLifetime {
		return nil, errdefs.Invalid("sleep_after %s is out of range (1s to %s)", d, maxLifetime)
	}
	rec, _, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec.SleepAfter = d
	rec.KeepAlive = false
	if err := c.opts.Store.UpdateSandbox(context.WithoutCancel(ctx), rec); err != nil {
		return nil, err
	}
	c.touch(rec.ID)
	return c.toAPI(rec), nil
}

// SetOnIdle changes what idling does to a sandbox: stop, pause, snapshot
// or hibernate (api.OnIdle*). Hibernate needs a runtime that can keep
// memory on disk (gVisor); the error says so otherwise.
func (c *Controller) SetOnIdle(ctx context.Context, ref, policy string) (*api.Sandbox, error) {
	rec, _, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.checkOnIdle(policy, rec); err != nil { // snapshots.go
		return nil, err
	}
	if rec.OnIdle == policy {
		return c.toAPI(rec), nil
	}
	rec.OnIdle = policy
	if err := c.opts.Store.UpdateSandbox(context.WithoutCancel(ctx), rec); err != nil {
		return nil, err
	}
	return c.toAPI(rec), nil
}
