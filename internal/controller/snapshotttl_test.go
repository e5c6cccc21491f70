package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = t
}

func commitLayer(t *testing.T, ss *snapshot.Store, content string) snapshot.Layer {
	t.Helper()
	tmp, err := ss.Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ss.Commit(System(context.Background()), tmp)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSnapshotTTLRenewal: a restore renews a snapshot to now + its TTL, not
// by its age; a TTL change sets the TTL later restores renew by; never
// stays never; an expired snapshot is neither listed nor restorable and the
// collector deletes it.
func TestSnapshotTTLRenewal(t *testing.T) {
	ctx := System(context.Background())
	day := 24 * time.Hour
	day0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{t: day0}
	c, ss := newSnapshotControllerAt(t, clock.Now)
	layer := commitLayer(t, ss, "x")
	snap := &store.Snapshot{
		ID: "snttl", Name: "deps", Image: "busybox", ImageDigest: "sha256:" + strings.Repeat("b", 64),
		Layers:    []store.SnapshotLayer{{Digest: layer.Digest, Size: layer.Size}},
		CreatedAt: day0, TTL: DefaultSnapshotTTL, ExpiresAt: day0.Add(DefaultSnapshotTTL),
	}
	if err := c.opts.Store.CreateSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	check := func(step string, wantTTL string, want time.Time) {
		t.Helper()
		got, err := c.GetSnapshot(ctx, "deps")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got.TTL != wantTTL {
			t.Errorf("%s: ttl %q, want %q", step, got.TTL, wantTTL)
		}
		switch {
		case want.IsZero() && got.ExpiresAt != nil:
			t.Errorf("%s: expires %v, want never", step, *got.ExpiresAt)
		case !want.IsZero() && (got.ExpiresAt == nil || !got.ExpiresAt.Equal(want)):
			t.Errorf("%s: expires %v, want %v", step, got.ExpiresAt, want)
		}
	}
	check("taken", "720h0m0s", day0.Add(30*day))

	// Restored on day 20 and day 40: 30 days from each restore, not the
	// snapshot's whole age added on top (day 50 then day 90).
	clock.Set(day0.Add(20 * day))
	c.renewSnapshot(ctx, snap.ID)
	check("restored on day 20", "720h0m0s", day0.Add(50*day))
	clock.Set(day0.Add(40 * day))
	c.renewSnapshot(ctx, snap.ID)
	check("restored on day 40", "720h0m0s", day0.Add(70*day))

	// `snapshot ttl deps 1h` on day 41: the next restore renews by an hour.
	clock.Set(day0.Add(41 * day))
	if _, err := c.SetSnapshotTTL(ctx, "deps", "1h"); err != nil {
		t.Fatal(err)
	}
	check("ttl set to 1h", "1h0m0s", day0.Add(41*day+time.Hour))
	clock.Set(day0.Add(41*day + 30*time.Minute))
	c.renewSnapshot(ctx, snap.ID)
	check("restored after the ttl change", "1h0m0s", day0.Add(41*day+90*time.Minute))

	// A create refused after planning (the name is taken) renews nothing.
	if err := c.opts.Store.CreateSandbox(ctx, &store.Sandbox{ID: "sbtaken", Name: "taken", State: api.StateStopped, CreatedAt: day0, KeyID: api.CallerLocal}); err != nil {
		t.Fatal(err)
	}
	clock.Set(day0.Add(41*day + 50*time.Minute))
	if _, err := c.Create(ctx, api.CreateSandboxRequest{FromSnapshot: "deps", Name: "taken"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("create over a taken name: %v, want conflict", err)
	}
	check("after a refused create", "1h0m0s", day0.Add(41*day+90*time.Minute))

	// Past its expiry it is gone from the API at once, and the collector
	// deletes its record and its layer.
	clock.Set(day0.Add(41*day + 90*time.Minute))
	if _, err := c.GetSnapshot(ctx, "deps"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("get of an expired snapshot: %v", err)
	}
	if list, err := c.ListSnapshots(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list shows an expired snapshot: %+v %v", list, err)
	}
	req := api.CreateSandboxRequest{FromSnapshot: "deps"}
	if _, err := c.planCreate(ctx, &req); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("restore of an expired snapshot: %v", err)
	}
	if err := c.validSnapshotName(ctx, "deps"); err != nil {
		t.Fatalf("the name of an expired snapshot is not free: %v", err)
	}
	c.expireSnapshots(ctx)
	if _, err := c.opts.Store.GetSnapshot(ctx, snap.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("expired record kept: %v", err)
	}
	if ss.HasLayer(layer.Digest) {
		t.Error("the expired snapshot's layer is still stored")
	}
}

// TestSnapshotTTLNever: "never" clears the expiry and a renewal leaves it
// cleared; a TTL given again expires from now.
func TestSnapshotTTLNever(t *testing.T) {
	ctx := System(context.Background())
	day0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{t: day0}
	c, ss := newSnapshotControllerAt(t, clock.Now)
	layer := commitLayer(t, ss, "y")
	if err := c.opts.Store.CreateSnapshot(ctx, &store.Snapshot{
		ID: "snnever", ImageDigest: "sha256:" + strings.Repeat("b", 64),
		Layers:    []store.SnapshotLayer{{Digest: layer.Digest}},
		CreatedAt: day0, TTL: time.Hour, ExpiresAt: day0.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	got, err := c.SetSnapshotTTL(ctx, "snnever", api.SnapshotTTLNever)
	if err != nil || got.ExpiresAt != nil || got.TTL != api.SnapshotTTLNever {
		t.Fatalf("never: %+v %v", got, err)
	}
	clock.Set(day0.Add(400 * 24 * time.Hour))
	c.renewSnapshot(ctx, "snnever")
	c.expireSnapshots(ctx)
	got, err = c.GetSnapshot(ctx, "snnever")
	if err != nil || got.ExpiresAt != nil {
		t.Fatalf("after a renewal and a collection: %+v %v", got, err)
	}
	got, err = c.SetSnapshotTTL(ctx, "snnever", "2h")
	if err != nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(clock.Now().Add(2*time.Hour)) {
		t.Fatalf("ttl again: %+v %v", got, err)
	}
	for _, bad := range []string{"", "soon", "0s", "-1h"} {
		if _, err := c.SetSnapshotTTL(ctx, "snnever", bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ttl %q: %v", bad, err)
		}
	}
}
