package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// forkSnapshotTTL: sandboxes made by a fork name their layers themselves,
// so the fork's snapshot record only needs to outlive the fork for a user
// who wants to make more copies of that moment.
const forkSnapshotTTL = 24 * time.Hour

// forkParallel bounds how many copies start at once.
const forkParallel = 4

// Fork snapshots a sandbox's files now and restores them into count new,
// independent sandboxes with the source's runtime, size, environment and
// idle policy. If any copy fails, the copies made are destroyed.
func (c *Controller) Fork(ctx context.Context, ref string, req api.ForkRequest) (*api.ForkResult, error) {
	return c.fork(ctx, ref, req, nil)
}

// fork is Fork; each, when set, adjusts every copy's create request
// (forkeach.go).
func (c *Controller) fork(ctx context.Context, ref string, req api.ForkRequest, each ForkCopyFunc) (*api.ForkResult, error) {
	n := req.Count
	if n == 0 {
		n = 1
	}
	if n < 1 || n > api.MaxForkCount {
		return nil, errdefs.Invalid("count %d: want 1 to %d", req.Count, api.MaxForkCount)
	}
	if req.NamePrefix != "" {
		if err := validateName(fmt.Sprintf("%s-%d", req.NamePrefix, n)); err != nil {
			return nil, errdefs.Invalid("name_prefix %q: names <prefix>-N must be valid sandbox names", rules.Truncate(req.NamePrefix, 80))
		}
	}
	if err := validateLabels(req.Labels); err != nil {
		return nil, err
	}
	rec, e, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	c.touch(rec.ID)
	src := c.toAPI(rec)
	// The fork's snapshot is the source sandbox's owner's, like the
	// sandbox it copies. With memory, it is a memory snapshot and every
	// copy is restored from it (memsnapshot.go).
	var snap *store.Snapshot
	if req.Memory {
		snap, err = c.memorySnapshotLocked(ctx, e, rec, "", forkSnapshotTTL, rec.KeyID)
	} else {
		snap, err = c.snapshotLocked(ctx, rec, "", forkSnapshotTTL, rec.KeyID)
	}
	unlock()
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(rec.Labels)
	if labels == nil && len(req.Labels) > 0 {
		labels = map[string]string{}
	}
	maps.Copy(labels, req.Labels)
	base := api.CreateSandboxRequest{
		Runtime:      rec.Runtime,
		Resources:    rec.Resources,
		Env:          rec.Env,
		Labels:       labels,
		KeepAlive:    rec.KeepAlive,
		FromSnapshot: snap.ID,
		OnIdle:       rec.OnIdle,
	}
	if rec.SleepAfter > 0 && !rec.KeepAlive {
		base.SleepAfter = rec.SleepAfter.String()
	}
	ctx = withForkOf(ctx, rec.ID) // named in each copy's restore entry (restoreledger.go)
	res := &api.ForkResult{Snapshot: *c.snapshotAPI(snap), Sandboxes: make([]api.Sandbox, n)}
	errs := make([]error, n)
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := base
			if req.NamePrefix != "" {
				r.Name = fmt.Sprintf("%s-%d", req.NamePrefix, i+1)
			}
			if each != nil {
				r.Labels = maps.Clone(r.Labels)
				each(src, i, &r)
			}
			sb, err := c.Create(ctx, r)
			if err != nil {
				errs[i] = fmt.Errorf("fork copy %d: %w", i+1, err)
				return
			}
			res.Sandboxes[i] = *sb
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, sb := range res.Sandboxes {
			if sb.ID == "" {
				continue
			}
			if derr := c.Delete(context.WithoutCancel(ctx), sb.ID); derr != nil {
				c.log.Warn("remove copy of a failed fork", "sandbox", sb.ID, "err", derr)
			}
		}
		return nil, err
	}
	c.recordSnapshot(ctx, src.ID, src.Name, map[string]string{"snapshot": snap.ID, "fork_count": strconv.Itoa(n)})
	return res, nil
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
