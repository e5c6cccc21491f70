package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// Pause freezes a running sandbox through its runtime's freezer: memory and
// processes are kept, and it uses no CPU until resumed. Pausing a paused
// sandbox is a no-op.
func (c *Controller) Pause(ctx context.Context, ref string) (*api.Sandbox, error) {
	rec, e, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rec.State == api.StatePaused {
		return c.toAPI(rec), nil
	}
	if err := checkTransition(rec.ID, rec.State, api.StatePaused); err != nil {
		return nil, err
	}
	p, err := c.pauser(rec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if err := p.Pause(ctx, rec.ID); err != nil {
		return nil, fmt.Errorf("pause sandbox %s: %w", rec.ID, err)
	}
	rec.LastActivityAt = time.Unix(0, e.activity.Load()).UTC()
	if err := c.setState(ctx, rec, api.StatePaused, "pause requested", false); err != nil {
		return nil, err
	}
	return c.toAPI(rec), nil
}

// Resume thaws a paused sandbox, or restores a hibernated one from its
// memory image. Resuming a running sandbox is a no-op.
func (c *Controller) Resume(ctx context.Context, ref string) (*api.Sandbox, error) {
	rec, e, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.resumeLocked(ctx, e, rec, "resume requested"); err != nil {
		return nil, err
	}
	return c.toAPI(rec), nil
}

// resumeLocked thaws rec if it is paused, restores it if it is
// hibernated; the caller holds e.mu.
func (c *Controller) resumeLocked(ctx context.Context, e *entry, rec *store.Sandbox, reason string) error {
	if rec.State == api.StateHibernated {
		return c.wakeLocked(ctx, e, rec, reason) // hibernate.go
	}
	if rec.State != api.StatePaused {
		if rec.State == api.StateRunning {
			return nil
		}
		return &InvalidTransitionError{ID: rec.ID, From: rec.State, To: api.StateRunning}
	}
	p, err := c.pauser(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if err := p.Resume(ctx, rec.ID); err != nil {
		return fmt.Errorf("resume sandbox %s: %w", rec.ID, err)
	}
	e.activity.Store(time.Now().UnixNano())
	return c.setState(ctx, rec, api.StateRunning, reason, false)
}

func (c *Controller) pauser(rec *store.Sandbox) (runtime.Pauser, error) {
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return nil, err
	}
	p, ok := b.(runtime.Pauser)
	if !ok {
		return nil, fmt.Errorf("%s cannot pause: %w", c.runtimeDesc(rec.Runtime), errdefs.ErrFailedPrecondition)
	}
	return p, nil
}

// lockRecord resolves ref, takes the sandbox's owner lock and re-reads the
// record under it, so the caller acts on the current state.
func (c *Controller) lockRecord(ctx context.Context, ref string) (*store.Sandbox, *entry, func(), error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, nil, nil, err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	if rec, err = c.resolve(ctx, rec.ID); err != nil {
		e.mu.Unlock()
		return nil, nil, nil, err
	}
	return rec, e, e.mu.Unlock, nil
}
