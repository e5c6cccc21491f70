package controller

import (
	"context"
	"fmt"
	"strconv"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/store"
)

// forkKey marks the context of the creates a fork makes, so their restore
// entries say which sandbox they are copies of.
type forkKey struct{}

func withForkOf(ctx context.Context, sourceID string) context.Context {
	return context.WithValue(ctx, forkKey{}, sourceID)
}

// recordRestore writes the "restore" entry of a sandbox made from a
// snapshot (create --from-snapshot, fork, or a restore of an imported
// snapshot), naming where its files came from. It follows the "create"
// entry, once the sandbox is running.
func (c *Controller) recordRestore(ctx context.Context, rec *store.Sandbox) {
	if rec.SnapshotID == "" {
		return
	}
	e := api.LedgerEntry{Kind: api.LedgerRestore, Data: map[string]string{
		"snapshot": rec.SnapshotID,
		"layers":   strconv.Itoa(len(rec.SnapshotLayers)),
	}}
	snap, err := c.opts.Store.GetSnapshot(ctx, rec.SnapshotID)
	if err == nil {
		if snap.Name != "" {
			e.Data["snapshot_name"] = snap.Name
		}
		if snap.SandboxID != "" {
			e.Data["from_sandbox"] = snap.SandboxID
		}
	}
	src, _ := ctx.Value(forkKey{}).(string)
	switch {
	case src != "":
		e.Data["fork_of"] = src
		e.Note = fmt.Sprintf("forked from sandbox %s (snapshot %s)", src, rec.SnapshotID)
	case err == nil && snap.SandboxID == "":
		e.Data["imported"] = "true"
		e.Note = fmt.Sprintf("restored from imported snapshot %s", describeSnap(snap))
	case err == nil:
		e.Note = fmt.Sprintf("restored from snapshot %s of sandbox %s", describeSnap(snap), snap.SandboxID)
	default:
		e.Note = "restored from snapshot " + rec.SnapshotID
	}
	_ = c.record(ctx, rec.ID, rec.Name, e)
}

func describeSnap(s *store.Snapshot) string {
	if s.Name != "" {
		return fmt.Sprintf("%s (%s)", s.ID, s.Name)
	}
	return s.ID
}

// recordIdleRestore writes the "restore" entry of a sandbox that idled into
// a snapshot and was started again from it by a request. It follows the
// "start" entry.
func (c *Controller) recordIdleRestore(ctx context.Context, rec *store.Sandbox) {
	e := api.LedgerEntry{Kind: api.LedgerRestore, Data: map[string]string{
		"layers":       strconv.Itoa(len(rec.SnapshotLayers)),
		"from_sandbox": rec.ID,
		"idle":         "true",
	}}
	if rec.SnapshotID != "" {
		e.Data["snapshot"] = rec.SnapshotID
		e.Note = fmt.Sprintf("request to a sandbox that idled into snapshot %s: its files restored from it", rec.SnapshotID)
	} else {
		e.Note = "request to a sandbox that idled into a snapshot: its files restored from its snapshot layers"
	}
	_ = c.record(ctx, rec.ID, rec.Name, e)
}
