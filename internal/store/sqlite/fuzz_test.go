package sqlite

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// FuzzSandboxRoundTrip feeds arbitrary user-chosen strings (name, labels,
// env) through the store: each must either be refused as invalid or come
// back byte for byte, and a label must find its sandbox.
func FuzzSandboxRoundTrip(f *testing.F) {
	seeds := [][4]string{
		{"name", "team", "infra", "v"},
		{"", `"quoted"`, `$.a[0]`, "\x00"},
		{"名前", "dotted.key", "", "\xff"},
		{"a'b", "'; DROP TABLE sandboxes; --", "%_", strings.Repeat("x", 300)},
		{"\u2028", "\\", "null", `{"k":1}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3])
	}
	path := filepath.Join(f.TempDir(), "fuzz.db")
	st, err := Open(f.Context(), path, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	var seq atomic.Int64

	f.Fuzz(func(t *testing.T, name, key, value, env string) {
		ctx := t.Context()
		sb := &store.Sandbox{
			ID:          fmt.Sprintf("sb-%d", seq.Add(1)),
			Name:        name,
			State:       api.StateRunning,
			ErrorReason: env,
			Labels:      map[string]string{key: value},
			Env:         map[string]string{"E": env},
		}
		err := st.CreateSandbox(ctx, sb)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrConflict) {
				t.Fatalf("CreateSandbox: %v", err)
			}
			if errors.Is(err, errdefs.ErrInvalidArgument) && allValid(name, key, value, env) {
				t.Fatalf("valid input refused: %v", err)
			}
			return
		}
		got, err := st.GetSandbox(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != name || got.ErrorReason != env || !maps.Equal(got.Labels, sb.Labels) || !maps.Equal(got.Env, sb.Env) {
			t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", got, sb)
		}
		list, err := st.ListSandboxes(ctx, map[string]string{key: value})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range list {
			found = found || l.ID == sb.ID
		}
		if !found {
			t.Fatalf("ListSandboxes(%q=%q) misses %s", key, value, sb.ID)
		}
		// Keep the shared database small and names free for later inputs.
		if err := st.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}

func allValid(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 || len(s) > maxNameLen {
			return false
		}
	}
	return true
}
