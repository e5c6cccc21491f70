package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store"
)

// startHook is a backend for tests of the logic above the runtime: Start
// runs a function (standing in for what happens concurrently while a
// container starts) and fails, so no agent is needed.
type startHook struct {
	start func(spec runtime.Spec) error
}

var _ runtime.Backend = (*startHook)(nil)

func (b *startHook) Name() string { return api.RuntimeRunc }
func (b *startHook) Start(_ context.Context, spec runtime.Spec) (runtime.Info, error) {
	return runtime.Info{}, b.start(spec)
}
func (b *startHook) Status(context.Context, string) (runtime.Status, error) {
	return "", runtime.ErrNotFound
}
func (b *startHook) Info(context.Context, string) (runtime.Info, error) {
	return runtime.Info{}, runtime.ErrNotFound
}
func (b *startHook) Signal(context.Context, string, syscall.Signal) error { return nil }
func (b *startHook) Stop(context.Context, string) error                   { return nil }
func (b *startHook) Destroy(context.Context, string) error                { return nil }
func (b *startHook) List(context.Context) ([]string, error)               { return nil, nil }

// newLeaseController is newSnapshotController with the default
// configuration, so Create admits sandboxes.
func newLeaseController(t *testing.T) (*Controller, *snapshot.Store) {
	t.Helper()
	c, ss := newSnapshotController(t)
	c.cfg = config.Default()
	c.cfg.StateDir = t.TempDir()
	c.opts.Config = c.cfg
	return c, ss
}

// snapshotOf commits a one-file layer and records a snapshot of it.
func snapshotOf(t *testing.T, c *Controller, ss *snapshot.Store, name, content string) *store.Snapshot {
	t.Helper()
	ctx := System(context.Background())
	tmp, err := ss.Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ss.Commit(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	snap := &store.Snapshot{
		ID: newID(), Name: name, Image: "busybox", ImageDigest: "sha256:" + strings.Repeat("b", 64),
		Layers: []store.SnapshotLayer{{Digest: l.Digest, Size: l.Size}}, CreatedAt: time.Now().UTC(),
	}
	if err := c.opts.Store.CreateSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

func liveSandboxes(t *testing.T, c *Controller) []*store.Sandbox {
	t.Helper()
	list, err := c.opts.Store.ListSandboxes(System(context.Background()), nil)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// resolveHook runs a function on the nth image resolution: a create
// resolves its image after planning a restore and before recording the
// sandbox, the window a concurrent delete used to fall into.
type resolveHook struct {
	Images
	n    int
	at   int
	fire func()
}

func (h *resolveHook) Resolve(ctx context.Context, ref string) (*image.Image, error) {
	if h.n++; h.n == h.at {
		h.fire()
	}
	return h.Images.Resolve(ctx, ref)
}

// TestRestoreLeaseKeepsLayersWhileStarting: a snapshot deleted and
// collected after a restore of it was planned, before its sandbox is
// recorded, does not take its layer from under the new sandbox; once the
// sandbox's record names the layer, the collector keeps it for the
// sandbox's life.
func TestRestoreLeaseKeepsLayersWhileStarting(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newLeaseController(t)
	snap := snapshotOf(t, c, ss, "deps", "restored")
	layer := snap.Layers[0].Digest
	// Planning resolves the snapshot's image once; create resolves it
	// again after the lease, before the record.
	c.opts.Images = &resolveHook{Images: c.opts.Images, at: 2, fire: func() {
		if err := c.DeleteSnapshot(ctx, snap.ID); err != nil {
			t.Errorf("delete during the create: %v", err)
		}
	}}
	var during []bool
	c.opts.Backends[api.RuntimeRunc] = &startHook{start: func(spec runtime.Spec) error {
		for _, p := range spec.Layers[1:] {
			_, err := os.Stat(filepath.Join(p, "f"))
			during = append(during, err == nil)
		}
		// A collection now (the record names the layer) keeps it too.
		c.collectLayers(ctx)
		return errors.New("the test ends the start here")
	}}
	_, err := c.Create(ctx, api.CreateSandboxRequest{FromSnapshot: "deps"})
	if err == nil || !strings.Contains(err.Error(), "the test ends the start here") {
		t.Fatalf("create: %v", err)
	}
	if len(during) != 1 || !during[0] {
		t.Fatalf("the layer went before the sandbox started: %v", during)
	}
	if _, err := c.opts.Store.GetSnapshot(ctx, snap.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the snapshot was not deleted: %v", err)
	}
	// The failed sandbox's record names the layer: still kept.
	c.collectLayers(ctx)
	if !ss.HasLayer(layer) {
		t.Fatal("a layer a sandbox record names was collected")
	}
	for _, sb := range liveSandboxes(t, c) {
		if err := c.destroy(ctx, sb.ID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	c.collectLayers(ctx)
	if ss.HasLayer(layer) {
		t.Fatal("a layer nothing names any more was kept")
	}
}

// TestRestoreLeaseFailsBeforeRecord: a layer that went between planning
// and the lease, or whose files changed on disk, fails the restore with a
// clear error before any sandbox is recorded.
func TestRestoreLeaseFailsBeforeRecord(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newLeaseController(t)
	c.opts.Backends[api.RuntimeRunc] = &startHook{start: func(runtime.Spec) error {
		t.Error("a restore of a bad layer reached the runtime")
		return errors.New("unreachable")
	}}

	gone := snapshotOf(t, c, ss, "gone", "one")
	req := api.CreateSandboxRequest{FromSnapshot: "gone"}
	plan, err := c.planCreate(ctx, &req)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.RemoveLayer(gone.Layers[0].Digest); err != nil {
		t.Fatal(err)
	}
	if _, err := c.leaseLayers(ctx, plan, nil); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "missing from disk") {
		t.Fatalf("lease of a layer gone after planning: %v", err)
	}

	if os.Geteuid() != 0 {
		// Without root no layer is sealed, and a change cannot be seen.
		t.Skip("needs root for the rest: layer seals are trusted.* extended attributes")
	}
	damaged := snapshotOf(t, c, ss, "damaged", "two")
	p, err := ss.LayerPath(damaged.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(p, "f")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(ctx, api.CreateSandboxRequest{FromSnapshot: "damaged"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "changed on disk") {
		t.Fatalf("restore of a damaged layer: %v", err)
	}
	if list := liveSandboxes(t, c); len(list) != 0 {
		t.Fatalf("a failed restore left sandbox records: %+v", list[0])
	}
}
