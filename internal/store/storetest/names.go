package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// sandboxNamed is the one live sandbox named name: not found when none
// is, an error when several owners hold the name.
func sandboxNamed(ctx context.Context, s store.Store, name string) (*store.Sandbox, error) {
	list, err := s.SandboxesByName(ctx, name)
	if err != nil {
		return nil, err
	}
	switch len(list) {
	case 0:
		return nil, errdefs.NotFound("sandbox named %q", name)
	case 1:
		return list[0], nil
	}
	return nil, fmt.Errorf("%d sandboxes named %q", len(list), name)
}

// snapshotNamed is sandboxNamed for snapshots.
func snapshotNamed(ctx context.Context, s store.Store, name string) (*store.Snapshot, error) {
	list, err := s.SnapshotsByName(ctx, name)
	if err != nil {
		return nil, err
	}
	switch len(list) {
	case 0:
		return nil, errdefs.NotFound("snapshot named %q", name)
	case 1:
		return list[0], nil
	}
	return nil, fmt.Errorf("%d snapshots named %q", len(list), name)
}

// testNamesPerOwner: a sandbox or snapshot name is unique per owner, not
// across owners; lookups by name return every owner's, oldest first.
func testNamesPerOwner(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, owner := range []string{"key-a", "key-b", ""} {
		sb := minimal(fmt.Sprintf("sb-dev-%d", i), "dev")
		sb.KeyID = owner
		sb.CreatedAt = base.Add(time.Duration(i) * time.Second)
		mustCreate(t, s, sb)
		snap := &store.Snapshot{
			ID: fmt.Sprintf("sn-dev-%d", i), Name: "dev", ImageDigest: "sha256:aa", Owner: owner,
			Layers: []store.SnapshotLayer{{Digest: "sha256:01", Size: 1}}, CreatedAt: base.Add(time.Duration(i) * time.Second),
		}
		checkErr(t, "CreateSnapshot", s.CreateSnapshot(ctx, snap), nil)
	}
	// One owner holds a name once.
	dup := minimal("sb-dev-dup", "dev")
	dup.KeyID = "key-a"
	err := s.CreateSandbox(ctx, dup)
	checkErr(t, "CreateSandbox of a name its owner holds", err, errdefs.ErrConflict)
	err = s.CreateSnapshot(ctx, &store.Snapshot{
		ID: "sn-dev-dup", Name: "dev", ImageDigest: "sha256:aa", Owner: "key-b",
		Layers: []store.SnapshotLayer{{Digest: "sha256:01", Size: 1}}, CreatedAt: base,
	})
	checkErr(t, "CreateSnapshot of a name its owner holds", err, errdefs.ErrConflict)

	sbs, err := s.SandboxesByName(ctx, "dev")
	checkErr(t, "SandboxesByName", err, nil)
	var ids []string
	for _, sb := range sbs {
		ids = append(ids, sb.ID+"/"+sb.KeyID)
	}
	if want := []string{"sb-dev-0/key-a", "sb-dev-1/key-b", "sb-dev-2/"}; !slices.Equal(ids, want) {
		t.Errorf("SandboxesByName(dev) = %v, want %v", ids, want)
	}
	snaps, err := s.SnapshotsByName(ctx, "dev")
	checkErr(t, "SnapshotsByName", err, nil)
	ids = nil
	for _, sn := range snaps {
		ids = append(ids, sn.ID+"/"+sn.Owner)
	}
	if want := []string{"sn-dev-0/key-a", "sn-dev-1/key-b", "sn-dev-2/"}; !slices.Equal(ids, want) {
		t.Errorf("SnapshotsByName(dev) = %v, want %v", ids, want)
	}
	// A name nobody holds is an empty list, not an error.
	for _, err := range []error{
		func() error { l, err := s.SandboxesByName(ctx, "nobody"); return errors.Join(err, nonEmpty(len(l))) }(),
		func() error { l, err := s.SnapshotsByName(ctx, "nobody"); return errors.Join(err, nonEmpty(len(l))) }(),
	} {
		checkErr(t, "by a name nobody holds", err, nil)
	}
}

func nonEmpty(n int) error {
	if n != 0 {
		return fmt.Errorf("%d found", n)
	}
	return nil
}

// testClaim: a claim replaces the record and hands it to the claimant in
// one step; an update afterwards keeps that owner; a claim onto a name
// the claimant holds is refused with the record left as it was, unowned
// by the claimant; a claim of a missing sandbox is not found.
func testClaim(t *testing.T, s store.Store) {
	ctx := t.Context()
	pooled := minimal("sb-pooled", "")
	pooled.KeyID = "paddock-pool"
	pooled.Labels = map[string]string{"pool-ready": "true"}
	mustCreate(t, s, pooled)
	held := minimal("sb-held", "taken")
	held.KeyID = "key-a"
	mustCreate(t, s, held)

	claim := clone(pooled)
	claim.KeyID, claim.Name, claim.Labels = "key-a", "taken", map[string]string{"mine": "1"}
	checkErr(t, "ClaimSandbox onto a name the claimant holds", s.ClaimSandbox(ctx, claim), errdefs.ErrConflict)
	if got := mustGet(t, s, "sb-pooled"); got.KeyID != "paddock-pool" || got.Labels["pool-ready"] != "true" || got.Name != "" {
		t.Errorf("after a refused claim: owner %q labels %v name %q, want it untouched", got.KeyID, got.Labels, got.Name)
	}

	claim.Name = "mine"
	checkErr(t, "ClaimSandbox", s.ClaimSandbox(ctx, claim), nil)
	got := mustGet(t, s, "sb-pooled")
	if got.KeyID != "key-a" || got.Name != "mine" || got.Labels["mine"] != "1" || got.Labels["pool-ready"] != "" {
		t.Errorf("claimed: owner %q name %q labels %v, want key-a's mine without the pool label", got.KeyID, got.Name, got.Labels)
	}
	got.State = api.StateStopped
	mustUpdate(t, s, got)
	if got := mustGet(t, s, "sb-pooled"); got.KeyID != "key-a" || got.State != api.StateStopped {
		t.Errorf("updated after the claim: owner %q state %q, want key-a and stopped", got.KeyID, got.State)
	}

	missing := minimal("sb-missing", "")
	missing.KeyID = "key-a"
	checkErr(t, "ClaimSandbox of a missing sandbox", s.ClaimSandbox(ctx, missing), errdefs.ErrNotFound)
}
