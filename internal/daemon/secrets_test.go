package daemon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

func TestSecretBox(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "paddock.db")
	st, err := sqlite.Open(t.Context(), dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	box := newSecretBox(dir, st)
	const value = "value-7d3f1c9e2b"
	if _, created, err := box.Set(t.Context(), "tok", "0123456789abcdef", false, []byte(value)); err != nil || !created {
		t.Fatalf("set: %v %v", created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, secretKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if got, err := box.Reveal("tok"); err != nil || got != value {
		t.Fatalf("reveal: %q %v", got, err)
	}
	// At rest: neither the value nor a trivial encoding of it is stored.
	rec, err := st.GetSecret(t.Context(), "tok")
	if err != nil || bytes.Contains(rec.Sealed, []byte(value)) {
		t.Fatalf("stored in clear: %v", err)
	}
	if ok, err := box.Exists(t.Context(), "tok"); !ok || err != nil {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if ok, err := box.Exists(t.Context(), "nope"); ok || err != nil {
		t.Fatalf("exists(nope): %v %v", ok, err)
	}
	if owner, ok, err := box.Owner(t.Context(), "tok"); owner != "0123456789abcdef" || !ok || err != nil {
		t.Fatalf("owner: %q %v %v", owner, ok, err)
	}
	if _, ok, err := box.Owner(t.Context(), "nope"); ok || err != nil {
		t.Fatalf("owner(nope): %v %v", ok, err)
	}
	// Another owner may not replace it; it keeps its value.
	if _, _, err := box.Set(t.Context(), "tok", "fedcba9876543210", false, []byte("other")); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("set by another owner: %v", err)
	}
	if got, err := box.Reveal("tok"); err != nil || got != value {
		t.Fatalf("after a refused set: %q %v", got, err)
	}

	// The database with another key (a copy without the key file) opens nothing.
	other := newSecretBox(t.TempDir(), st)
	if _, err := other.Reveal("tok"); !errors.Is(err, errdefs.ErrFailedPrecondition) || bytes.Contains([]byte(err.Error()), []byte(value)) {
		t.Fatalf("reveal with another key: %v", err)
	}
	// A sealed value moved to another name does not open either.
	rec.Name = "moved"
	if _, err := st.PutSecret(t.Context(), rec, false); err != nil {
		t.Fatal(err)
	}
	if _, err := box.Reveal("moved"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("moved secret opened: %v", err)
	}
	// A new box on the same state dir reuses the key.
	if got, err := newSecretBox(dir, st).Reveal("tok"); err != nil || got != value {
		t.Fatalf("reopen: %q %v", got, err)
	}
}
