package sqlite

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestMigrateScopesUpgrade: a database from before key scopes keeps its
// keys able to do what they did (scope all), and its snapshots, backups
// and secrets belong to no one; keys made after the upgrade are own by
// default.
func TestMigrateScopesUpgrade(t *testing.T) {
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for i, m := range ms {
		if strings.Contains(m.name, "scopes_owners") {
			at = i
		}
	}
	if at < 0 {
		t.Fatal("no scopes_owners migration")
	}
	path := t.TempDir() + "/paddock.db"
	db := rawDB(t, path)
	ctx := t.Context()
	if err := migrate(ctx, db, ms[:at], testLogger(t)); err != nil {
		t.Fatal(err)
	}
	// Rows as the previous release wrote them.
	for _, q := range []string{
		`INSERT INTO api_keys (id, name, prefix, secret_hash, created_at) VALUES ('0123456789abcdef', 'old', 'pdk_abcdef', zeroblob(32), 1)`,
		`INSERT INTO snapshots (id, name, image_digest, layers, size, created_at) VALUES ('snapold', 'before', 'sha256:00', '[{"digest":"sha256:11","size":1}]', 1, 1)`,
		`INSERT INTO backups (id, sandbox_id, path, size_bytes, sha256, storage, created_at) VALUES ('bkold', 'sbold', '/data', 1, 'ab', 'local', 1)`,
		`INSERT INTO secrets (name, sealed, created_at, updated_at) VALUES ('tok', zeroblob(40), 1, 1)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st := openAt(t, path)

	k, err := st.GetKey(ctx, "0123456789abcdef")
	if err != nil || k.Scope != api.KeyScopeAll || k.CreatedBy != "" {
		t.Fatalf("key from before scopes: %+v %v, want scope all, created by no one", k, err)
	}
	snap, err := st.GetSnapshot(ctx, "snapold")
	if err != nil || snap.Owner != "" {
		t.Fatalf("old snapshot: %+v %v, want no owner", snap, err)
	}
	bk, err := st.GetBackup(ctx, "bkold")
	if err != nil || bk.Owner != "" {
		t.Fatalf("old backup: %+v %v, want no owner", bk, err)
	}
	sec, err := st.GetSecret(ctx, "", "tok")
	if err != nil || sec.Owner != "" {
		t.Fatalf("old secret: %+v %v, want no owner", sec, err)
	}

	nk := &store.Key{ID: "fedcba9876543210", Name: "new", Prefix: "pdk_123456", SecretHash: make([]byte, 32)}
	nk.SecretHash[0] = 1
	if err := st.CreateKey(ctx, nk); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetKey(ctx, nk.ID); err != nil || got.Scope != api.KeyScopeOwn || nk.Scope != api.KeyScopeOwn {
		t.Fatalf("new key without a scope: %+v (written back %q) %v, want own", got, nk.Scope, err)
	}
	// The schema refuses a scope that is neither, whatever writes it.
	if _, err := db.ExecContext(ctx, `UPDATE api_keys SET scope = 'some' WHERE id = ?`, nk.ID); err == nil {
		t.Error("the schema accepted scope 'some'")
	}
}

// TestMigrateNamesPerOwnerUpgrade: a database from before per-owner names
// keeps its sandboxes and snapshots under their names, and after the
// upgrade another owner may take the same names while the holder may not
// take them twice.
func TestMigrateNamesPerOwnerUpgrade(t *testing.T) {
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for i, m := range ms {
		if strings.Contains(m.name, "names_per_owner") {
			at = i
		}
	}
	if at < 0 {
		t.Fatal("no names_per_owner migration")
	}
	path := t.TempDir() + "/paddock.db"
	db := rawDB(t, path)
	ctx := t.Context()
	if err := migrate(ctx, db, ms[:at], testLogger(t)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sandboxes (id, name, state, key_id, created_at) VALUES ('sbold', 'dev', 'running', 'key-a', 1)`,
		`INSERT INTO snapshots (id, name, image_digest, layers, size, created_at, owner) VALUES ('snold', 'deps', 'sha256:00', '[{"digest":"sha256:11","size":1}]', 1, 1, 'key-a')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st := openAt(t, path)
	if got, err := st.SandboxesByName(ctx, "dev"); err != nil || len(got) != 1 || got[0].ID != "sbold" {
		t.Fatalf("old sandbox by name: %v %v", got, err)
	}
	for _, c := range []struct {
		id, owner string
		err       error
	}{{"sbnewb", "key-b", nil}, {"sbnewa", "key-a", errdefs.ErrConflict}} {
		sb := &store.Sandbox{ID: c.id, Name: "dev", State: api.StateRunning, KeyID: c.owner}
		if err := st.CreateSandbox(ctx, sb); !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("sandbox dev of %s after the upgrade: %v, want %v", c.owner, err, c.err)
		}
		snap := &store.Snapshot{ID: "sn" + c.id, Name: "deps", ImageDigest: "sha256:00", Owner: c.owner,
			Layers: []store.SnapshotLayer{{Digest: "sha256:11", Size: 1}}}
		if err := st.CreateSnapshot(ctx, snap); !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("snapshot deps of %s after the upgrade: %v, want %v", c.owner, err, c.err)
		}
	}
}
