package controller

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

// TestRestartAfterKilledSnapshot: what a daemon killed during snapshots
// leaves (a partial layer in tmp/; a layer committed to disk whose record
// was never written) is cleared by the next start, the store's Open and
// the first expiry pass, while a complete snapshot stays listed and
// restorable.
func TestRestartAfterKilledSnapshot(t *testing.T) {
	ctx := System(context.Background())
	dir := t.TempDir()
	dbPath, snapDir := filepath.Join(dir, "db"), filepath.Join(dir, "snaps")
	digest := "sha256:" + strings.Repeat("b", 64)
	imgs := images{"busybox": {Name: "busybox", Digest: digest, Layers: []string{dir}}}
	open := func() (*Controller, *snapshot.Store) {
		t.Helper()
		st, err := sqlite.Open(ctx, dbPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ss, err := snapshot.Open(snapshot.Options{Dir: snapDir})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Store: st, Images: imgs, Backends: map[string]runtime.Backend{"runc": nil}, Snapshots: ss, Config: config.Default()})
		if err != nil {
			t.Fatal(err)
		}
		return c, ss
	}

	// Before the kill: one complete snapshot, one layer committed without
	// its record, one copy under way.
	c, ss := open()
	complete := commitLayer(t, ss, "complete")
	now := time.Now().UTC()
	if err := c.opts.Store.CreateSnapshot(ctx, &store.Snapshot{
		ID: "sncomplete", Name: "complete", Image: "busybox", ImageDigest: digest,
		Layers: []store.SnapshotLayer{{Digest: complete.Digest, Size: complete.Size}}, Size: complete.Size,
		CreatedAt: now, TTL: DefaultSnapshotTTL, ExpiresAt: now.Add(DefaultSnapshotTTL),
	}); err != nil {
		t.Fatal(err)
	}
	orphan := commitLayer(t, ss, "committed, never recorded")
	partial, err := ss.Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(partial, "half"), []byte("half a fi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !ss.HasLayer(orphan.Digest) {
		t.Fatal("the orphaned layer was not committed")
	}

	// The restart.
	c, ss = open()
	if e, err := os.ReadDir(filepath.Join(snapDir, "tmp")); err != nil || len(e) != 0 {
		t.Fatalf("tmp/ after the restart: %d entries, %v", len(e), err)
	}
	c.expireSnapshots(ctx) // RunSnapshotExpiry's first pass, at start
	if ss.HasLayer(orphan.Digest) {
		t.Error("the committed but unrecorded layer survived the restart")
	}
	if !ss.HasLayer(complete.Digest) {
		t.Error("the complete snapshot's layer was collected")
	}
	list, err := c.ListSnapshots(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "sncomplete" {
		t.Fatalf("listed after the restart: %+v %v", list, err)
	}
	req := api.CreateSandboxRequest{FromSnapshot: "complete"}
	if _, err := c.planCreate(ctx, &req); err != nil {
		t.Fatalf("the complete snapshot is not restorable: %v", err)
	}
}
