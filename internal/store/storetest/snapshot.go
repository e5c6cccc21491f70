package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func testSnapshots(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	snap := &store.Snapshot{
		ID: "sn1", Name: "after-deps", SandboxID: "sb1", Image: "base", ImageDigest: "sha256:aa",
		Parent: "sn0", Layers: []store.SnapshotLayer{{Digest: "sha256:01", Size: 10}, {Digest: "sha256:02", Size: 20, Added: 4096}},
		Size: 20, CreatedAt: at, TTL: time.Hour, ExpiresAt: at.Add(time.Hour),
	}
	if err := s.CreateSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSnapshot(ctx, "sn1")
	if err != nil || !reflect.DeepEqual(got, snap) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if got, err := snapshotNamed(ctx, s, "after-deps"); err != nil || got.ID != "sn1" {
		t.Fatalf("by name: %+v %v", got, err)
	}
	dup := *snap
	dup.ID = "sn2"
	if err := s.CreateSnapshot(ctx, &dup); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate name: %v", err)
	}
	unnamed := &store.Snapshot{ID: "sn3", ImageDigest: "sha256:aa", Layers: []store.SnapshotLayer{{Digest: "sha256:03"}},
		Memory: &store.SnapshotMemory{Runtime: "gvisor", Format: "runsc v1", Bytes: 12345, Resources: api.Resources{CPU: 1, MemoryMB: 512, DiskMB: 1024}}}
	if err := s.CreateSnapshot(ctx, unnamed); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSnapshot(ctx, "sn3"); err != nil || !reflect.DeepEqual(got.Memory, unnamed.Memory) {
		t.Fatalf("memory round trip: %+v %v", got, err)
	}
	if err := s.SetSnapshotTTL(ctx, "sn1", 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSnapshot(ctx, "sn1"); !got.ExpiresAt.IsZero() || got.TTL != 0 {
		t.Errorf("ttl and expiry not cleared: %v %v", got.TTL, got.ExpiresAt)
	}
	list, err := s.ListSnapshots(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	bad := []*store.Snapshot{
		{ID: "", ImageDigest: "x", Layers: []store.SnapshotLayer{{Digest: "d"}}},
		{ID: "x1", Layers: []store.SnapshotLayer{{Digest: "d"}}},
		{ID: "x2", ImageDigest: "x"},
		{ID: "x3", ImageDigest: "x", Layers: []store.SnapshotLayer{{Digest: "d", Added: -1}}},
		{ID: "x4", ImageDigest: "x", Layers: []store.SnapshotLayer{{Digest: "d"}}, TTL: time.Hour},                                   // ttl without expiry
		{ID: "x5", ImageDigest: "x", Layers: []store.SnapshotLayer{{Digest: "d"}}, ExpiresAt: at},                                    // expiry without ttl
		{ID: "x6", ImageDigest: "x", Layers: []store.SnapshotLayer{{Digest: "d"}}, TTL: -time.Hour, ExpiresAt: at},                   // negative ttl
		{ID: "x7", ImageDigest: "x", Layers: []store.SnapshotLayer{{Digest: "d"}}, Memory: &store.SnapshotMemory{Runtime: "gvisor"}}, // memory without a format
	}
	for _, b := range bad {
		if err := s.CreateSnapshot(ctx, b); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("invalid %+v accepted: %v", b, err)
		}
	}
	if err := s.DeleteSnapshot(ctx, "sn1"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		s.DeleteSnapshot(ctx, "sn1"),
		s.SetSnapshotTTL(ctx, "sn1", time.Hour, at),
		s.RenewSnapshot(ctx, "sn1", at),
		func() error { _, err := s.GetSnapshot(ctx, "sn1"); return err }(),
		func() error { _, err := snapshotNamed(ctx, s, "after-deps"); return err }(),
	} {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("after delete: %v", err)
		}
	}
}

func testSandboxSnapshotFields(t *testing.T, s store.Store) {
	ctx := context.Background()
	sb := minimal("sb-snapfields", "")
	sb.SnapshotID, sb.SnapshotLayers, sb.OnIdle = "sn9", []string{"sha256:01", "sha256:02"}, "snapshot"
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, sb.ID)
	if err != nil || got.SnapshotID != "sn9" || !reflect.DeepEqual(got.SnapshotLayers, sb.SnapshotLayers) || got.OnIdle != "snapshot" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	got.SnapshotLayers = append(got.SnapshotLayers, "sha256:03")
	got.OnIdle = "pause"
	if err := s.UpdateSandbox(ctx, got); err != nil {
		t.Fatal(err)
	}
	again, _ := s.GetSandbox(ctx, sb.ID)
	if len(again.SnapshotLayers) != 3 || again.OnIdle != "pause" {
		t.Errorf("update lost fields: %+v", again)
	}
}

// testSnapshotTTL: a snapshot's TTL is kept apart from its expiry; a renewal
// moves only the expiry, and never gives one to a snapshot without a TTL.
func testSnapshotTTL(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string, ttl time.Duration) {
		t.Helper()
		sn := &store.Snapshot{ID: id, ImageDigest: "sha256:aa", Layers: []store.SnapshotLayer{{Digest: "sha256:01"}}, CreatedAt: at, TTL: ttl}
		if ttl > 0 {
			sn.ExpiresAt = at.Add(ttl)
		}
		if err := s.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	mk("snttl", 30*24*time.Hour)
	mk("snnever", 0)
	get := func(id string) *store.Snapshot {
		t.Helper()
		got, err := s.GetSnapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := get("snttl"); got.TTL != 30*24*time.Hour || !got.ExpiresAt.Equal(at.Add(30*24*time.Hour)) {
		t.Fatalf("created: ttl %v expires %v", got.TTL, got.ExpiresAt)
	}

	day40 := at.Add(40 * 24 * time.Hour)
	if err := s.RenewSnapshot(ctx, "snttl", day40.Add(30*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := get("snttl"); got.TTL != 30*24*time.Hour || !got.ExpiresAt.Equal(day40.Add(30*24*time.Hour)) {
		t.Errorf("renewed: ttl %v expires %v", got.TTL, got.ExpiresAt)
	}
	if err := s.RenewSnapshot(ctx, "snnever", day40); err != nil {
		t.Fatal(err)
	}
	if got := get("snnever"); got.TTL != 0 || !got.ExpiresAt.IsZero() {
		t.Errorf("a renewal gave a snapshot that never expires an expiry: ttl %v expires %v", got.TTL, got.ExpiresAt)
	}
	checkErr(t, "RenewSnapshot without expiry", s.RenewSnapshot(ctx, "snttl", time.Time{}), errdefs.ErrInvalidArgument)

	// Changing the TTL sets both; never clears both; then a TTL again.
	if err := s.SetSnapshotTTL(ctx, "snttl", time.Hour, day40.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := get("snttl"); got.TTL != time.Hour || !got.ExpiresAt.Equal(day40.Add(time.Hour)) {
		t.Errorf("ttl changed: ttl %v expires %v", got.TTL, got.ExpiresAt)
	}
	if err := s.SetSnapshotTTL(ctx, "snnever", 2*time.Hour, day40.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := get("snnever"); got.TTL != 2*time.Hour || !got.ExpiresAt.Equal(day40.Add(2*time.Hour)) {
		t.Errorf("ttl given to a snapshot that had none: ttl %v expires %v", got.TTL, got.ExpiresAt)
	}
	for _, tc := range []struct {
		ttl time.Duration
		at  time.Time
	}{{time.Hour, time.Time{}}, {0, day40}, {-time.Hour, day40}} {
		checkErr(t, "SetSnapshotTTL disagreeing", s.SetSnapshotTTL(ctx, "snttl", tc.ttl, tc.at), errdefs.ErrInvalidArgument)
	}
	if got := get("snttl"); got.TTL != time.Hour {
		t.Errorf("a refused change altered the ttl: %v", got.TTL)
	}
}
