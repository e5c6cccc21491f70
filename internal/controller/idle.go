package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// A running sandbox with no request in flight for its sleep_after (and
// not kept alive) meets its idle policy, on_idle: stop, pause (memory kept
// in place), snapshot (files into snapshot layers, compute and writable
// layer freed; the next request restores them) or hibernate (memory to
// disk: hibernate.go). Hard lifetimes are lifetime.go's.

// idleLoop stops sandboxes idle longer than their sleep_after; hard
// lifetimes are lifetimeLoop's.
func (c *Controller) idleLoop() {
	defer close(c.idleDone)
	t := time.NewTicker(c.opts.IdleInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stopIdle:
			return
		case <-t.C:
			c.checkIdle(System(context.Background()))
		}
	}
}

func (c *Controller) checkIdle(ctx context.Context) {
	recs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		c.log.Error("idle check", "err", err)
		return
	}
	now := time.Now()
	for _, r := range recs {
		if r.Timeout > 0 && now.Sub(r.CreatedAt) >= r.Timeout {
			continue // lifetimeLoop ends it (lifetime.go)
		}
		if r.State != api.StateRunning || r.KeepAlive || r.SleepAfter <= 0 {
			continue
		}
		e := c.entry(r.ID)
		if e.active.Load() > 0 {
			continue
		}
		idle := now.Sub(time.Unix(0, e.activity.Load()))
		if idle >= r.SleepAfter {
			if err := c.onIdle(ctx, r, fmt.Sprintf("idle for %s (sleep_after %s)", idle.Round(time.Second), r.SleepAfter)); err != nil {
				c.log.Error("idle stop", "sandbox", r.ID, "err", err)
			}
		}
	}
}

// onIdle applies a sandbox's idle policy; the idle loop calls it.
func (c *Controller) onIdle(ctx context.Context, r *store.Sandbox, reason string) error {
	switch r.OnIdle {
	case api.OnIdlePause:
		return c.pauseIdle(ctx, r.ID, reason)
	case api.OnIdleHibernate:
		return c.hibernateIdle(ctx, r.ID, reason) // hibernate.go
	case api.OnIdleSnapshot:
		if len(r.SnapshotLayers)+1 > maxIdleChain {
			_, err := c.stop(ctx, r.ID, reason+"; snapshot chain full, stopped instead (files kept on disk)")
			return err
		}
		err := c.snapshotIdle(ctx, r.ID, reason)
		if errors.Is(err, errdefs.ErrResourceExhausted) {
			// The snapshot store is at its cap (quota.go): keep the files
			// on disk rather than retry the snapshot every tick.
			_, err = c.stop(ctx, r.ID, reason+"; snapshot store full, stopped instead (files kept on disk)")
		}
		return err
	default:
		_, err := c.stop(ctx, r.ID, reason)
		return err
	}
}

func (c *Controller) pauseIdle(ctx context.Context, id, reason string) error {
	rec, e, unlock, err := c.lockRecord(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.State != api.StateRunning || e.active.Load() > 0 {
		return nil // changed meanwhile: not idle any more
	}
	p, err := c.pauser(rec)
	if err != nil {
		return err
	}
	if err := p.Pause(ctx, rec.ID); err != nil {
		return fmt.Errorf("pause idle sandbox %s: %w", rec.ID, err)
	}
	rec.LastActivityAt = time.Unix(0, e.activity.Load()).UTC()
	return c.setState(ctx, rec, api.StatePaused, reason+"; paused, memory and processes kept", false)
}

// snapshotIdle snapshots an idle sandbox's files into a snapshot (unnamed,
// with the default TTL) whose layers the sandbox's record names, then frees
// its compute and writable layer. The sandbox stays "stopped"; the next
// request starts it on its image plus those layers. The ledger gets a
// "snapshot" entry naming the snapshot, before the "stop" entry.
func (c *Controller) snapshotIdle(ctx context.Context, id, reason string) error {
	rec, e, unlock, err := c.lockRecord(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.State != api.StateRunning || e.active.Load() > 0 {
		return nil
	}
	chain, top, err := c.captureLayer(ctx, rec)
	if err != nil {
		return fmt.Errorf("snapshot idle sandbox %s: %w", rec.ID, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	now := c.now()
	snap := &store.Snapshot{
		ID: newID(), SandboxID: rec.ID, Image: rec.Image, ImageDigest: rec.ImageDigest,
		Parent: rec.SnapshotID, Layers: chain, Size: top.Size,
		CreatedAt: now, TTL: DefaultSnapshotTTL, ExpiresAt: expiry(now, DefaultSnapshotTTL),
		Owner: rec.KeyID, // the sandbox's owner: it restores from it
	}
	if err := c.opts.Store.CreateSnapshot(ctx, snap); err != nil {
		c.snaps.mu.Unlock() // the unrecorded layer is collected later
		return fmt.Errorf("record idle snapshot of sandbox %s: %w", rec.ID, err)
	}
	rec.LastActivityAt = time.Unix(0, e.activity.Load()).UTC()
	rec.SnapshotID = snap.ID
	rec.SnapshotLayers = rec.SnapshotLayers[:0:0]
	for _, l := range chain {
		rec.SnapshotLayers = append(rec.SnapshotLayers, l.Digest)
	}
	// The layers are recorded before the writable layer goes: a crash in
	// between leaves both, which start the same files.
	err = c.setState(ctx, rec, api.StateStopping, fmt.Sprintf("%s; files snapshotted as layer %s (snapshot %s)", reason, top.Digest, snap.ID), false)
	c.snaps.mu.Unlock()
	if err != nil {
		return err
	}
	c.log.Info("idle snapshot taken", "sandbox", rec.ID, "snapshot", snap.ID, "layer", top.Digest, "size", top.Size)
	_ = c.record(ctx, rec.ID, rec.Name, api.LedgerEntry{
		Kind: api.LedgerSnapshot,
		Note: "idle: files snapshotted before the compute was freed; the next request restores them",
		Data: map[string]string{"snapshot": snap.ID, "layer": top.Digest, "idle": "true"},
	})
	if e.agent != nil {
		e.agent.Close()
		e.agent = nil
	}
	b, err := c.backend(rec.Runtime)
	if err == nil {
		err = b.Destroy(ctx, rec.ID)
	}
	if err != nil {
		_ = c.setState(ctx, rec, api.StateError, "free compute after idle snapshot: "+err.Error(), false)
		return err
	}
	return c.setState(ctx, rec, api.StateStopped, "idle snapshot done: compute and writable layer freed; the next request restores the files", false)
}

// maxIdleChain leaves room for a user's own snapshot of a sandbox that
// idled into snapshots many times.
const maxIdleChain = 12

// restoring says whether a start rebuilds a sandbox from its snapshot
// layers because its writable layer was freed (an idle snapshot), and
// returns the reason the state history gives for it.
func (c *Controller) restoring(ctx context.Context, rec *store.Sandbox, reason string) (string, bool) {
	if len(rec.SnapshotLayers) == 0 {
		return reason, false
	}
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return reason, false
	}
	if _, err := b.Status(ctx, rec.ID); !errors.Is(err, runtime.ErrNotFound) {
		return reason, false
	}
	if rec.SnapshotID != "" {
		return reason + "; restoring its files from snapshot layers (snapshot " + rec.SnapshotID + ")", true
	}
	return reason + "; restoring its files from snapshot layers", true
}

// checkOnIdle refuses an unknown idle policy, snapshot on a daemon
// without snapshots, and hibernate for sandbox rec when its runtime
// cannot keep memory (rec nil: not known yet; create checks it once the
// runtime is resolved).
func (c *Controller) checkOnIdle(policy string, rec *store.Sandbox) error {
	switch policy {
	case "", api.OnIdleStop, api.OnIdlePause:
		return nil
	case api.OnIdleSnapshot:
		_, err := c.snapStore()
		return err
	case api.OnIdleHibernate:
		if rec == nil {
			return nil
		}
		if _, err := c.checkpointer(rec); err != nil { // hibernate.go
			return fmt.Errorf("on_idle hibernate: %w", err)
		}
		return nil
	}
	return errdefs.Invalid("on_idle %q: want %s, %s, %s or %s", rules.Truncate(policy, 40), api.OnIdleStop, api.OnIdlePause, api.OnIdleSnapshot, api.OnIdleHibernate)
}
