package storetest

import (
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// testKeyScopes: a key's scope is stored as given, own when none is, and
// read back by every lookup; anything else is refused.
func testKeyScopes(t *testing.T, s store.Store) {
	ctx := t.Context()
	tests := []struct {
		id, scope, want string
		err             error
	}{
		{"key-own", api.KeyScopeOwn, api.KeyScopeOwn, nil},
		{"key-all", api.KeyScopeAll, api.KeyScopeAll, nil},
		{"key-default", "", api.KeyScopeOwn, nil},
		{"key-bad", "everything", "", errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			k := &store.Key{ID: tt.id, Name: tt.id, SecretHash: hash(tt.id), Scope: tt.scope, CreatedBy: "creator-" + tt.id}
			checkErr(t, "CreateKey", s.CreateKey(ctx, k), tt.err)
			if tt.err != nil {
				_, err := s.GetKey(ctx, tt.id)
				checkErr(t, "GetKey of a refused key", err, errdefs.ErrNotFound)
				return
			}
			if k.Scope != tt.want {
				t.Errorf("scope written back %q, want %q", k.Scope, tt.want)
			}
			byID, err := s.GetKey(ctx, tt.id)
			checkErr(t, "GetKey", err, nil)
			byHash, err := s.KeyByHash(ctx, hash(tt.id))
			checkErr(t, "KeyByHash", err, nil)
			if byID.Scope != tt.want || byHash.Scope != tt.want || byID.Name != tt.id {
				t.Errorf("GetKey %+v, KeyByHash %+v: want scope %q", byID, byHash, tt.want)
			}
			if byID.CreatedBy != k.CreatedBy || byHash.CreatedBy != k.CreatedBy {
				t.Errorf("GetKey created by %q, KeyByHash %q: want %q", byID.CreatedBy, byHash.CreatedBy, k.CreatedBy)
			}
		})
	}
	list, err := s.ListKeys(ctx)
	checkErr(t, "ListKeys", err, nil)
	for _, k := range list {
		if k.Scope != api.KeyScopeOwn && k.Scope != api.KeyScopeAll {
			t.Errorf("ListKeys: %s has scope %q", k.ID, k.Scope)
		}
		if k.CreatedBy != "creator-"+k.ID {
			t.Errorf("ListKeys: %s created by %q", k.ID, k.CreatedBy)
		}
	}
	_, err = s.GetKey(ctx, "key-none")
	checkErr(t, "GetKey missing", err, errdefs.ErrNotFound)
	checkErr(t, "DeleteKey", s.DeleteKey(ctx, "key-own"), nil)
	_, err = s.GetKey(ctx, "key-own")
	checkErr(t, "GetKey deleted", err, errdefs.ErrNotFound)
}

// testOwners: snapshots and backups keep the owner they were made with,
// in every lookup; "" (older records) stays "".
func testOwners(t *testing.T, s store.Store) {
	ctx := t.Context()
	owners := []string{"0123456789abcdef", api.CallerLocal, ""}
	for i, owner := range owners {
		snap := &store.Snapshot{
			ID: "sn-" + string(rune('a'+i)), Name: "named-" + string(rune('a'+i)), ImageDigest: "sha256:aa",
			Layers: []store.SnapshotLayer{{Digest: "sha256:01", Size: 1}}, CreatedAt: base, Owner: owner,
		}
		checkErr(t, "CreateSnapshot", s.CreateSnapshot(ctx, snap), nil)
		bk := &store.Backup{
			ID: "bk-" + string(rune('a'+i)), SandboxID: "sb", Path: "/p", SHA256: "ab", Storage: "local",
			CreatedAt: base, Owner: owner,
		}
		checkErr(t, "CreateBackup", s.CreateBackup(ctx, bk), nil)
	}
	snaps, err := s.ListSnapshots(ctx)
	checkErr(t, "ListSnapshots", err, nil)
	bks, err := s.ListBackups(ctx, "")
	checkErr(t, "ListBackups", err, nil)
	if len(snaps) != len(owners) || len(bks) != len(owners) {
		t.Fatalf("%d snapshots and %d backups, want %d of each", len(snaps), len(bks), len(owners))
	}
	for i, owner := range owners {
		if snaps[i].Owner != owner || bks[i].Owner != owner {
			t.Errorf("list %d: snapshot owner %q, backup owner %q, want %q", i, snaps[i].Owner, bks[i].Owner, owner)
		}
		byID, err := s.GetSnapshot(ctx, snaps[i].ID)
		checkErr(t, "GetSnapshot", err, nil)
		byName, err := snapshotNamed(ctx, s, snaps[i].Name)
		checkErr(t, "SnapshotsByName", err, nil)
		bk, err := s.GetBackup(ctx, bks[i].ID)
		checkErr(t, "GetBackup", err, nil)
		if byID.Owner != owner || byName.Owner != owner || bk.Owner != owner {
			t.Errorf("%d: get owners %q %q %q, want %q", i, byID.Owner, byName.Owner, bk.Owner, owner)
		}
	}
	bad := &store.Backup{ID: "bk-bad", SandboxID: "sb", Path: "/p", SHA256: "ab", Storage: "local", Owner: "a\x00b"}
	checkErr(t, "CreateBackup with a NUL in its owner", s.CreateBackup(ctx, bad), errdefs.ErrInvalidArgument)
}
