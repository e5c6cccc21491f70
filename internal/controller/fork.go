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
