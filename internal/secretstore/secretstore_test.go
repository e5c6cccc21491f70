package secretstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

const (
	ownerA = "0123456789abcdef"
	ownerB = "fedcba9876543210"
)

func TestBox(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "paddock.db")
	st, err := sqlite.Open(t.Context(), dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	box := New(Options{StateDir: dir, Store: st, Sandboxes: st})
	const value = "value-7d3f1c9e2b"
	if _, created, err := box.Set(ctx, ownerA, "tok", []byte(value)); err != nil || !created {
		t.Fatalf("set: %v %v", created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if got, err := box.Reveal(ctx, ownerA, "tok"); err != nil || got != value {
		t.Fatalf("reveal: %q %v", got, err)
	}
	// At rest: neither the value nor a trivial encoding of it is stored.
	rec, err := st.GetSecret(ctx, ownerA, "tok")
	if err != nil || bytes.Contains(rec.Sealed, []byte(value)) {
		t.Fatalf("stored in clear: %v", err)
	}
	if s, err := box.Get(ctx, ownerA, "tok"); err != nil || s.Name != "tok" || s.CreatedBy != ownerA {
		t.Fatalf("get: %+v %v", s, err)
	}
	if _, err := box.Get(ctx, ownerB, "tok"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another owner's get: %v, want not found", err)
	}
	if _, err := box.Reveal(ctx, ownerB, "tok"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another owner's reveal: %v, want not found", err)
	}

	// The database with another key (a copy without the key file) opens nothing.
	other := New(Options{StateDir: t.TempDir(), Store: st, Sandboxes: st})
	if _, err := other.Reveal(ctx, ownerA, "tok"); !errors.Is(err, errdefs.ErrFailedPrecondition) || bytes.Contains([]byte(err.Error()), []byte(value)) {
		t.Fatalf("reveal with another key: %v", err)
	}
	// A sealed value moved to another name does not open either.
	rec.Name = "moved"
	if _, err := st.PutSecret(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := box.Reveal(ctx, ownerA, "moved"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("moved secret opened: %v", err)
	}
	// A new box on the same state dir reuses the key.
	if got, err := New(Options{StateDir: dir, Store: st, Sandboxes: st}).Reveal(ctx, ownerA, "tok"); err != nil || got != value {
		t.Fatalf("reopen: %q %v", got, err)
	}
}

// TestBoxRevealFor: the egress proxy's lookup for a sandbox's rule
// opens the secret its sandbox's owner keeps under that name, never
// another owner's of the same name, and nothing for a sandbox that is
// unknown or destroyed.
func TestBoxRevealFor(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "paddock.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	box := New(Options{StateDir: dir, Store: st, Sandboxes: st})
	for _, s := range []struct{ owner, value string }{{ownerA, "value-of-a"}, {ownerB, "value-of-b"}} {
		if _, created, err := box.Set(ctx, s.owner, "tok", []byte(s.value)); err != nil || !created {
			t.Fatalf("set %s's tok: %v %v", s.owner, created, err)
		}
	}
	for _, sb := range []*store.Sandbox{
		{ID: "sba", State: api.StateRunning, KeyID: ownerA},
		{ID: "sbb", State: api.StateRunning, KeyID: ownerB},
		{ID: "sbc", State: api.StateRunning, KeyID: "0000111122223333"},
		{ID: "sbgone", State: api.StateDestroyed, KeyID: ownerA},
	} {
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		sandbox, want string
		wantErr       error
	}{
		{"sba", "value-of-a", nil},
		{"sbb", "value-of-b", nil},
		{"sbc", "", errdefs.ErrNotFound},
		{"sbgone", "", errdefs.ErrNotFound},
		{"sbnone", "", errdefs.ErrNotFound},
	} {
		got, err := box.RevealFor(tt.sandbox, "tok")
		if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Errorf("RevealFor(%s, tok) = %q, %v; want %q, %v", tt.sandbox, got, err, tt.want, tt.wantErr)
		}
	}
}
