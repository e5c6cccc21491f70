package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// A sandbox whose container ends without being asked to (its agent killed
// by the OOM killer or a signal, a gVisor sentry gone) goes to state error
// with the reason the backend gives, the moment it happens: every start
// and re-adoption arms a watcher (runtime.Watcher) for that run of the
// container. The dead container is removed, its files kept; a start brings
// it back.

// A request whose agent connection broke waits up to deathWaitForEnd for
// the watcher to see the container end (both happen as the agent's
// process exits), then up to deathWaitForRecord for the end to be told
// apart from a stop and recorded.
const (
	deathWaitForEnd    = time.Second
	deathWaitForRecord = 15 * time.Second
)

// deathNote follows one run of a sandbox's container.
type deathNote struct {
	ended   chan struct{} // closed when the container ended
	decided chan struct{} // closed when onDeath has recorded it, or seen it was no death
}

// armWatch starts following the container of a sandbox that was just
// started or adopted. The caller holds e.mu. A watcher of an earlier run is
// ended: only the newest run's end counts.
func (c *Controller) armWatch(e *entry, id, runtimeName string) {
	b, err := c.backend(runtimeName)
	if err != nil {
		return
	}
	w, ok := b.(runtime.Watcher)
	if !ok {
		return
	}
	if e.unwatch != nil {
		e.unwatch()
	}
	e.watchGen++
	gen := e.watchGen
	note := &deathNote{ended: make(chan struct{}), decided: make(chan struct{})}
	e.death.Store(note)
	ctx, cancel := c.untilClose()
	e.unwatch = cancel
	go func() {
		defer cancel()
		exit, err := w.Wait(ctx, id)
		defer close(note.decided)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("cannot follow the sandbox's container; a death will show at its next use", "sandbox", id, "err", err)
			}
			return
		}
		close(note.ended)
		c.onDeath(id, gen, exit)
	}()
}

// onDeath records that run gen of a sandbox's container ended. An end the
// daemon caused (stop, destroy, a newer run) is not a death: by the time
// the owner lock is free, the record no longer says running, or a newer
// run has been armed.
func (c *Controller) onDeath(id string, gen uint64, exit runtime.Exit) {
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watchGen != gen || c.closed() {
		return
	}
	ctx, cancel := context.WithTimeout(System(context.Background()), teardownTimeout)
	defer cancel()
	rec, err := c.opts.Store.GetSandbox(ctx, id)
	if err != nil || (rec.State != api.StateRunning && rec.State != api.StatePaused) {
		return
	}
	c.log.Warn("sandbox died", "sandbox", id, "reason", exit.Reason)
	if e.agent != nil {
		e.agent.Close()
		e.agent = nil
	}
	if b, err := c.backend(rec.Runtime); err == nil {
		// The dead container and its mounts go; the writable layer stays.
		if err := b.Stop(ctx, id); err != nil {
			c.log.Warn("remove dead container", "sandbox", id, "err", err)
		}
	}
	if err := c.setState(ctx, rec, api.StateError, exit.Reason, false); err != nil {
		c.log.Error("record sandbox death", "sandbox", id, "err", err)
	}
}

// deathReasons start the reasons onDeath records (internal/runtime/oci).
var deathReasons = []string{"out of memory", "agent exited", "gVisor sentry killed"}

// deathError says a sandbox died and why; nil if state and reason are not
// those of a death.
func deathError(id, state, reason string) error {
	if state != api.StateError {
		return nil
	}
	for _, p := range deathReasons {
		if strings.HasPrefix(reason, p) {
			return fmt.Errorf("sandbox %s stopped: %s; start it again to use it (its files are kept): %w", id, reason, errdefs.ErrFailedPrecondition)
		}
	}
	return nil
}

// explainBrokenAgent turns an error from a sandbox's agent into one naming
// why the sandbox died, when it did: a request cut by the death (its
// connection refused or broken) waits briefly for the watcher's record.
func (c *Controller) explainBrokenAgent(ctx context.Context, id string, err error) error {
	if err == nil {
		return nil
	}
	if derr := c.destroyedMeanwhile(ctx, id); derr != nil {
		return derr
	}
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if !ok {
		return err
	}
	note := e.death.Load()
	if note == nil {
		return err
	}
	t := time.NewTimer(deathWaitForEnd)
	defer t.Stop()
	select {
	case <-note.ended:
	case <-t.C:
		return err
	case <-ctx.Done():
		return err
	}
	t.Reset(deathWaitForRecord)
	select {
	case <-note.decided:
	case <-t.C:
		return err
	}
	rec, gerr := c.opts.Store.GetSandbox(context.WithoutCancel(ctx), id)
	if gerr != nil {
		return err
	}
	if derr := deathError(id, rec.State, rec.ErrorReason); derr != nil {
		return derr
	}
	return err
}

// destroyedMeanwhile is the error for a request cut because its sandbox
// was destroyed while it ran (a delete, its lifetime reached): not found,
// with the reason, rather than the broken connection's words.
func (c *Controller) destroyedMeanwhile(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	rec, err := c.opts.Store.GetSandbox(ctx, id)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("sandbox %s was destroyed while the request ran: %w", id, errdefs.ErrNotFound)
		}
		return nil
	}
	if rec.State != api.StateDestroying && rec.State != api.StateDestroyed {
		return nil
	}
	why := ""
	if h, herr := c.opts.Store.StateHistory(ctx, id); herr == nil {
		for i := len(h) - 1; i >= 0; i-- {
			if h[i].To == api.StateDestroying {
				why = " (" + h[i].Reason + ")"
				break
			}
		}
	}
	return fmt.Errorf("sandbox %s was destroyed while the request ran%s: %w", id, why, errdefs.ErrNotFound)
}

// oomWatch reads the sandbox's OOM kill count now; the function it returns
// says whether the count has grown since. A command that ends by SIGKILL
// while it grew was, all but certainly, killed for memory: the count is
// the sandbox's, so a process killed by hand in the same instant as
// another is OOM-killed would be marked too.
func (c *Controller) oomWatch(id string) func() bool {
	// No record read: the backend that has the sandbox's cgroup answers.
	for _, b := range c.opts.Backends {
		oc, ok := b.(runtime.OOMCounter)
		if !ok {
			continue
		}
		before, ok := oc.OOMKills(id)
		if !ok {
			continue
		}
		return func() bool {
			after, ok := oc.OOMKills(id)
			return ok && after > before
		}
	}
	return func() bool { return false }
}
