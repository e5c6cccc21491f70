package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

// images is an image store holding fixed images: restore planning only
// resolves names to digests and layers.
type images map[string]*image.Image

func (m images) Resolve(_ context.Context, ref string) (*image.Image, error) {
	for _, img := range m {
		if img.Name == ref || img.Digest == ref {
			return img, nil
		}
	}
	return nil, errdefs.NotFound("image %q", ref)
}

func (m images) Ensure(ctx context.Context, name string, _ image.Progress) (*image.Image, error) {
	return m.Resolve(ctx, name)
}

func newSnapshotController(t *testing.T) (*Controller, *snapshot.Store) {
	t.Helper()
	return newSnapshotControllerAt(t, nil)
}

// newSnapshotControllerAt is newSnapshotController on a given clock (nil:
// the real one).
func newSnapshotControllerAt(t *testing.T, clock func() time.Time) (*Controller, *snapshot.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(System(context.Background()), filepath.Join(dir, "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ss, err := snapshot.Open(snapshot.Options{Dir: filepath.Join(dir, "snaps")})
	if err != nil {
		t.Fatal(err)
	}
	imgs := images{
		"busybox": {Name: "busybox", Digest: "sha256:" + strings.Repeat("b", 64), Layers: []string{dir}},
		"base":    {Name: "base", Digest: "sha256:" + strings.Repeat("a", 64), Layers: []string{dir}},
	}
	c, err := New(Options{Store: st, Images: imgs, Backends: map[string]runtime.Backend{"runc": nil}, Snapshots: ss, Clock: clock, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	return c, ss
}

func TestPlanCreateFromSnapshot(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newSnapshotController(t)
	tmp, err := ss.Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	layer, err := ss.Commit(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	snap := &store.Snapshot{
		ID: "snapone", Name: "deps", Image: "busybox", ImageDigest: "sha256:" + strings.Repeat("b", 64),
		Layers: []store.SnapshotLayer{{Digest: layer.Digest, Size: layer.Size}}, CreatedAt: now.Add(-time.Hour), TTL: time.Minute, ExpiresAt: now.Add(time.Minute),
	}
	if err := c.opts.Store.CreateSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	missing := *snap
	missing.ID, missing.Name = "snapgone", "gone"
	missing.Layers = []store.SnapshotLayer{{Digest: "sha256:" + strings.Repeat("0", 64)}}
	if err := c.opts.Store.CreateSnapshot(ctx, &missing); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		req     api.CreateSandboxRequest
		want    error
		message string
	}{
		{"same image by name", api.CreateSandboxRequest{FromSnapshot: "deps", Image: "busybox"}, nil, ""},
		{"image left out", api.CreateSandboxRequest{FromSnapshot: "snapone"}, nil, ""},
		{"another image", api.CreateSandboxRequest{FromSnapshot: "deps", Image: "base"}, errdefs.ErrFailedPrecondition, "cannot be restored onto base"},
		{"layer missing from disk", api.CreateSandboxRequest{FromSnapshot: "gone"}, errdefs.ErrFailedPrecondition, "missing from disk"},
		{"unknown snapshot", api.CreateSandboxRequest{FromSnapshot: "nope"}, errdefs.ErrNotFound, ""},
		{"bad on_idle", api.CreateSandboxRequest{OnIdle: "freeze"}, errdefs.ErrInvalidArgument, "on_idle"},
		{"bad ref", api.CreateSandboxRequest{FromSnapshot: "../x"}, errdefs.ErrInvalidArgument, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			plan, err := c.planCreate(ctx, &req)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				rec := &store.Sandbox{}
				plan.apply(rec)
				if req.Image != snap.ImageDigest || rec.SnapshotID != snap.ID || len(rec.SnapshotLayers) != 1 || rec.Image != "busybox" {
					t.Fatalf("plan: image %q, record %+v", req.Image, rec)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("got %v, want %v containing %q", err, tc.want, tc.message)
			}
		})
	}
	// Planning renews nothing: only a restore that made a running sandbox
	// does (TestSnapshotTTLRenewal).
	got, err := c.opts.Store.GetSnapshot(ctx, "snapone")
	if err != nil || !got.ExpiresAt.Equal(snap.ExpiresAt) {
		t.Fatalf("planning changed the expiry: %v, want %v (%v)", got.ExpiresAt, snap.ExpiresAt, err)
	}
}

func TestParseTTL(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", DefaultSnapshotTTL, true},
		{"never", 0, true},
		{"72h", 72 * time.Hour, true},
		{"30s", 30 * time.Second, true},
		{"1s", time.Second, true},
		{"500ms", 0, false},
		{"0s", 0, false},
		{"-1h", 0, false},
		{"soon", 0, false},
		{"1000000h", 0, false},
	}
	for _, tc := range tests {
		got, err := parseTTL(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseTTL(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestCollectLayersKeepsUsed(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newSnapshotController(t)
	mk := func(content string) string {
		tmp, _ := ss.Temp()
		os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644)
		l, err := ss.Commit(ctx, tmp)
		if err != nil {
			t.Fatal(err)
		}
		return l.Digest
	}
	bySnap, bySandbox, unused := mk("a"), mk("b"), mk("c")
	if err := c.opts.Store.CreateSnapshot(ctx, &store.Snapshot{ID: "s1", ImageDigest: "sha256:x", Layers: []store.SnapshotLayer{{Digest: bySnap}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.opts.Store.CreateSandbox(ctx, &store.Sandbox{ID: "sb1", State: api.StateStopped, SnapshotLayers: []string{bySandbox}}); err != nil {
		t.Fatal(err)
	}
	c.collectLayers(ctx)
	for d, want := range map[string]bool{bySnap: true, bySandbox: true, unused: false} {
		if ss.HasLayer(d) != want {
			t.Errorf("layer %s kept=%v, want %v", d, !want, want)
		}
	}
}

// layerCopier is a backend that copies layers and cannot pause; live says
// whether it marks its copy as taken live.
type layerCopier struct {
	runtime.Backend
	copied int
}

func (l *layerCopier) SnapshotLayer(_ context.Context, _, dst string) error {
	l.copied++
	return os.WriteFile(filepath.Join(dst, "f"), []byte("x"), 0o644)
}

type liveCopier struct{ layerCopier }

func (*liveCopier) SnapshotsLive() {}

// A backend that cannot freeze but copies live snapshots a running
// sandbox without a Pauser; one that says nothing is still refused.
func TestCopyFrozenLiveBackend(t *testing.T) {
	c, _ := newSnapshotController(t)
	ctx := context.Background()
	rec := &store.Sandbox{ID: "s1", State: api.StateRunning, Runtime: "runc"}

	live := &liveCopier{}
	if err := c.copyFrozen(ctx, rec, live, live, t.TempDir()); err != nil || live.copied != 1 {
		t.Fatalf("live copy of a running sandbox: %v (copied %d)", err, live.copied)
	}
	plain := &layerCopier{}
	err := c.copyFrozen(ctx, rec, plain, plain, t.TempDir())
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || plain.copied != 0 {
		t.Fatalf("copy without a freeze from a backend that cannot pause: %v (copied %d)", err, plain.copied)
	}
}
