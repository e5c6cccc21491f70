package controller

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// The core's side of a fork (the copies are made by
// internal/controller/forks): the moment the copies start from, taken
// under the source's lock, and each copy created from it.

// forkSnapshotTTL: sandboxes made by a fork name their layers themselves,
// so the fork's snapshot record only needs to outlive the fork for a user
// who wants to make more copies of that moment.
const forkSnapshotTTL = 24 * time.Hour

// ForkPoint is the moment a fork copies: its source as it was, the
// snapshot taken of it, and the create request every copy starts from.
type ForkPoint struct {
	Source   *api.Sandbox
	Snapshot *api.Snapshot
	// Copy restores Snapshot with the source's runtime, size, environment,
	// labels (with the fork's own over them) and idle policy.
	Copy api.CreateSandboxRequest
	// Count is how many copies the fork makes.
	Count int
}

// StartFork validates req and snapshots the sandbox ref's files now (with
// req.Memory, its memory too: a memory snapshot, memsnapshot.go), under the
// sandbox's lock, as its owner's snapshot.
func (c *Controller) StartFork(ctx context.Context, ref string, req api.ForkRequest) (*ForkPoint, error) {
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
	return &ForkPoint{Source: src, Snapshot: c.snapshotAPI(snap), Copy: base, Count: n}, nil
}

// CreateForkCopy creates one copy of fp from req (fp.Copy, adjusted), as
// a create of ctx's caller whose restore entry names the source
// (restoreledger.go).
func (c *Controller) CreateForkCopy(ctx context.Context, fp *ForkPoint, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	return c.Create(withForkOf(ctx, fp.Source.ID), req)
}

// RecordFork writes a fork that made all its copies to its source's
// ledger.
func (c *Controller) RecordFork(ctx context.Context, fp *ForkPoint) {
	c.recordSnapshot(ctx, fp.Source.ID, fp.Source.Name, map[string]string{"snapshot": fp.Snapshot.ID, "fork_count": strconv.Itoa(fp.Count)})
}
