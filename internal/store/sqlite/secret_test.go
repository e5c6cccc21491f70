package sqlite

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestSecrets(t *testing.T) {
	st, _ := openTemp(t)
	ctx := t.Context()
	sealed := bytes.Repeat([]byte{7}, 40)
	s := &store.Secret{Name: "gh-token", Sealed: sealed}
	created, err := st.PutSecret(ctx, s)
	if err != nil || !created || s.CreatedAt.IsZero() {
		t.Fatalf("create: %v %v %+v", created, err, s)
	}
	first := s.CreatedAt
	s2 := &store.Secret{Name: "gh-token", Sealed: bytes.Repeat([]byte{8}, 40)}
	if created, err := st.PutSecret(ctx, s2); err != nil || created || !s2.CreatedAt.Equal(first) {
		t.Fatalf("replace: %v %v, created at %v, want %v", created, err, s2.CreatedAt, first)
	}
	got, err := st.GetSecret(ctx, "", "gh-token")
	if err != nil || !bytes.Equal(got.Sealed, s2.Sealed) || !got.CreatedAt.Equal(first) || got.UpdatedAt.Before(first) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := st.PutSecret(ctx, &store.Secret{Name: "b", Sealed: sealed}); err != nil {
		t.Fatal(err)
	}
	list, err := st.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "b" || list[1].Name != "gh-token" {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := st.DeleteSecret(ctx, "", "b"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSecret(ctx, "", "b"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.GetSecret(ctx, "", "b"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	for _, bad := range []*store.Secret{
		{Name: "Bad", Sealed: sealed},
		{Name: "", Sealed: sealed},
		{Name: "ok", Sealed: []byte{1, 2}},
		{Name: "ok", Sealed: make([]byte, 70001)},
	} {
		if _, err := st.PutSecret(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("PutSecret(%q, %d bytes) = %v", bad.Name, len(bad.Sealed), err)
		}
	}
}

// TestSecretNamesPerOwner: two owners each keep a secret of one name;
// each owner's put, get and delete reach its own only, and no owner's
// name is taken by another's.
func TestSecretNamesPerOwner(t *testing.T) {
	st, _ := openTemp(t)
	ctx := t.Context()
	put := func(owner string, v byte) bool {
		t.Helper()
		created, err := st.PutSecret(ctx, &store.Secret{Name: "tok", Sealed: bytes.Repeat([]byte{v}, 40), Owner: owner})
		if err != nil {
			t.Fatalf("put %s's tok: %v", owner, err)
		}
		return created
	}
	value := func(owner string) byte {
		t.Helper()
		got, err := st.GetSecret(ctx, owner, "tok")
		if err != nil {
			t.Fatalf("get %s's tok: %v", owner, err)
		}
		if got.Owner != owner {
			t.Fatalf("get %s's tok returned %s's", owner, got.Owner)
		}
		return got.Sealed[0]
	}
	if !put("key-a", 1) || !put("key-b", 2) {
		t.Fatal("each owner's first put must create its own secret")
	}
	if put("key-a", 3) {
		t.Fatal("key-a's second put created a secret, want its own replaced")
	}
	if a, b := value("key-a"), value("key-b"); a != 3 || b != 2 {
		t.Fatalf("values a=%d b=%d, want 3 and 2", a, b)
	}
	if _, err := st.GetSecret(ctx, "key-c", "tok"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("key-c's tok: %v, want not found", err)
	}
	if _, err := st.GetSecret(ctx, "", "tok"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("no owner's tok: %v, want not found", err)
	}
	list, err := st.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].Owner != "key-a" || list[1].Owner != "key-b" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := st.DeleteSecret(ctx, "key-c", "tok"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("key-c deletes tok: %v, want not found", err)
	}
	if err := st.DeleteSecret(ctx, "key-a", "tok"); err != nil {
		t.Fatal(err)
	}
	if b := value("key-b"); b != 2 {
		t.Fatalf("key-b's tok after key-a's delete holds %d, want 2", b)
	}
	if _, err := st.GetSecret(ctx, "key-a", "tok"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("key-a's deleted tok: %v, want not found", err)
	}
}

// TestMigrateSecretNamesPerOwner: secrets stored before names were per
// owner keep their owner, value and times.
func TestMigrateSecretNamesPerOwner(t *testing.T) {
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for i, m := range ms {
		if strings.Contains(m.name, "secret_names_per_owner") {
			at = i
		}
	}
	if at < 0 {
		t.Fatal("no secret_names_per_owner migration")
	}
	path := t.TempDir() + "/paddock.db"
	db := rawDB(t, path)
	ctx := t.Context()
	if err := migrate(ctx, db, ms[:at], testLogger(t)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO secrets (name, sealed, owner, created_at, updated_at) VALUES ('tok', zeroblob(40), 'key-a', 1, 2)`,
		`INSERT INTO secrets (name, sealed, owner, created_at, updated_at) VALUES ('old', zeroblob(30), '', 3, 4)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st := openAt(t, path)
	for _, want := range []struct {
		owner, name string
		size        int
		created     int64
	}{{"key-a", "tok", 40, 1}, {"", "old", 30, 3}} {
		got, err := st.GetSecret(ctx, want.owner, want.name)
		if err != nil || got.Owner != want.owner || len(got.Sealed) != want.size || got.CreatedAt.UnixNano() != want.created {
			t.Fatalf("%q's %s after the upgrade: %+v %v", want.owner, want.name, got, err)
		}
	}
	// The name is key-a's now, not the daemon's: another owner may take it.
	if created, err := st.PutSecret(ctx, &store.Secret{Name: "tok", Sealed: bytes.Repeat([]byte{1}, 40), Owner: "key-b"}); err != nil || !created {
		t.Fatalf("key-b's tok after the upgrade: %v %v, want created", created, err)
	}
}
