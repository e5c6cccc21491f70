package sqlite

import (
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestSandboxKeyIDKept: the creating caller is stored, survives updates
// (which never change it) and a reopen.
func TestSandboxKeyIDKept(t *testing.T) {
	st, path := openTemp(t)
	ctx := t.Context()
	for _, tt := range []struct{ id, key string }{{"keyed", "0123456789abcdef"}, {"local", api.CallerLocal}, {"old", ""}} {
		rec := &store.Sandbox{ID: tt.id, State: api.StateCreating, Image: "busybox", ImageDigest: "sha256:00", Runtime: "runc", KeyID: tt.key}
		if err := st.CreateSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.State = api.StateRunning
		rec.KeyID = "changed"
		if err := st.UpdateSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openAt(t, path)
	for id, want := range map[string]string{"keyed": "0123456789abcdef", "local": api.CallerLocal, "old": ""} {
		got, err := st.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.KeyID != want {
			t.Errorf("%s: key id %q, want %q", id, got.KeyID, want)
		}
	}
}
