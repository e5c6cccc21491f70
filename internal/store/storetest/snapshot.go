package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func testSnapshots(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	snap := &store.Snapshot{
		ID: "sn1", Name: "after-deps", SandboxID: "sb1", Image: "base", ImageDigest: "sha256:aa",
		Parent: "sn0", Layers: []store.SnapshotLayer{{Digest: "sha256:01", Size: 10}, {Digest: "sha256:02", Size: 20, Added: 4096}},
		Size: 20, CreatedAt: at, ExpiresAt: at.Add(time.Hour),
	}
	if err := s.CreateSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSnapshot(ctx, "sn1")
	if err != nil || !reflect.DeepEqual(got, snap) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if got, err := s.GetSnapshotByName(ctx, "after-deps"); err != nil || got.ID != "sn1" {
		t.Fatalf("by name: %+v %v", got, err)
	}
	dup := *snap
	dup.ID = "sn2"
	if err := s.CreateSnapshot(ctx, &dup); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate name: %v", err)
	}
	unnamed := &store.Snapshot{ID: "sn3", ImageDigest: "sha256:aa", Layers: []store.SnapshotLayer{{Digest: "sha256:03"}}}
	if err := s.CreateSnapshot(ctx, unnamed); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSnapshotExpiry(ctx, "sn1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSnapshot(ctx, "sn1"); !got.ExpiresAt.IsZero() {
		t.Errorf("expiry not cleared: %v", got.ExpiresAt)
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
		s.SetSnapshotExpiry(ctx, "sn1", at),
		func() error { _, err := s.GetSnapshot(ctx, "sn1"); return err }(),
		func() error { _, err := s.GetSnapshotByName(ctx, "after-deps"); return err }(),
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
