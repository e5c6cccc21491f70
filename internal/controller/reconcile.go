package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// reconcile makes records and reality agree after a daemon start: every
// runtime sandbox without a live record is removed; every record whose
// compute runs is re-adopted (its agent must answer); every record whose
// compute is gone says so.
func (c *Controller) reconcile(ctx context.Context) error {
	recs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		return err
	}
	live := make(map[string]*store.Sandbox, len(recs))
	for _, r := range recs {
		live[r.ID] = r
	}
	for name, b := range c.opts.Backends {
		ids, err := b.List(ctx)
		if err != nil {
			return fmt.Errorf("list %s sandboxes: %w", name, err)
		}
		for _, id := range ids {
			if r, ok := live[id]; ok && r.Runtime == name {
				continue
			}
			c.log.Warn("removing orphan sandbox", "sandbox", id, "runtime", name)
			dctx, cancel := context.WithTimeout(ctx, teardownTimeout)
			err := b.Destroy(dctx, id)
			cancel()
			if err != nil {
				c.log.Error("remove orphan", "sandbox", id, "err", err)
			}
		}
	}
	c.reconcileNetwork(ctx, recs) // network.go
	c.removeMemoryStages()        // memexport.go
	// Each record is its own: several at once, so the restart's
	// blackout grows with the slowest runtime call, not with their sum
	// (every one starts the runtime's binary at least once).
	sem := make(chan struct{}, reconcileParallel)
	var wg sync.WaitGroup
	for _, r := range recs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.reconcileOne(ctx, r)
		}()
	}
	wg.Wait()
	return nil
}

// reconcileParallel bounds the records reconciled at once at a start.
const reconcileParallel = 8

func (c *Controller) reconcileOne(ctx context.Context, rec *store.Sandbox) {
	log := c.log.With("sandbox", rec.ID, "op", "reconcile")
	b, err := c.backend(rec.Runtime)
	if err != nil {
		_ = c.setState(ctx, rec, api.StateError, err.Error(), true)
		return
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.activity.Store(rec.LastActivityAt.UnixNano())
	if rec.LastActivityAt.IsZero() {
		e.activity.Store(time.Now().UnixNano())
	}
	status, err := b.Status(ctx, rec.ID)
	if errors.Is(err, runtime.ErrNotFound) {
		status = ""
	} else if err != nil {
		log.Error("status", "err", err)
		_ = c.setState(ctx, rec, api.StateError, "runtime status at daemon start: "+err.Error(), true)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	switch rec.State {
	case api.StateDestroying:
		if err := b.Destroy(dctx, rec.ID); err != nil {
			_ = c.setState(ctx, rec, api.StateError, "destroy interrupted by a daemon restart, then failed: "+err.Error(), true)
			return
		}
		_ = c.setState(ctx, rec, api.StateDestroyed, "destroy finished after a daemon restart", true)
	case api.StateCreating:
		// A create the daemon did not see through has no caller waiting
		// for it any more: remove its compute, keep the record's reason.
		if err := b.Stop(dctx, rec.ID); err != nil {
			log.Error("stop interrupted create", "err", err)
		}
		_ = c.setState(ctx, rec, api.StateError, "daemon restarted while the sandbox was being created", true)
	case api.StateRunning, api.StatePaused:
		switch status {
		case runtime.StatusRunning, runtime.StatusPaused:
			if status == runtime.StatusPaused {
				if rec.State == api.StatePaused {
					return
				}
				// Running by the record, frozen by the runtime: a
				// freeze for a snapshot (or a pause not yet recorded)
				// that the daemon was killed in the middle of. Callers
				// were told it runs, so it is thawed and adopted.
				p, ok := b.(runtime.Pauser)
				if !ok {
					_ = c.setState(ctx, rec, api.StatePaused, "found frozen at daemon start by a runtime that cannot thaw", true)
					return
				}
				if err := p.Resume(dctx, rec.ID); err != nil {
					log.Error("thaw a sandbox found frozen", "err", err)
					_ = c.setState(ctx, rec, api.StatePaused, "found frozen at daemon start and could not be thawed: "+err.Error(), true)
					return
				}
				log.Info("thawed a sandbox found frozen at daemon start")
			}
			if err := c.adopt(ctx, e, rec); err != nil {
				log.Error("re-adopt", "err", err)
				_ = b.Stop(dctx, rec.ID)
				_ = c.setState(ctx, rec, api.StateStopped, "agent did not answer at daemon start; stopped, files kept", true)
				return
			}
			log.Info("re-adopted running sandbox")
			// Waits for e.mu, held here; adopts the sandbox's terminals.
			go c.terms.Recover(System(context.Background()), rec.ID) // internal/controller/terminals
		case runtime.StatusStopped:
			// A container that died while the daemon was away says why,
			// as one that dies under its eyes does (death.go); one gone
			// without a trace (a host reboot) is merely stopped.
			if w, ok := b.(runtime.Watcher); ok {
				if exit, err := w.Wait(dctx, rec.ID); err == nil && exit.Known {
					_ = b.Stop(dctx, rec.ID)
					_ = c.setState(ctx, rec, api.StateError, exit.Reason, true)
					return
				}
			}
			_ = c.setState(ctx, rec, api.StateStopped, "container was gone at daemon start; files kept", true)
		default:
			_ = c.setState(ctx, rec, api.StateError, "container and files were gone at daemon start", true)
		}
	case api.StateHibernating, api.StateHibernated:
		c.reconcileHibernation(ctx, dctx, e, rec, b, status) // hibernate.go
	case api.StateStopping, api.StateStopped:
		if status == runtime.StatusRunning || status == runtime.StatusPaused {
			_ = b.Stop(dctx, rec.ID)
		}
		if rec.State != api.StateStopped {
			_ = c.setState(ctx, rec, api.StateStopped, "stop finished after a daemon restart", true)
		}
	}
}
