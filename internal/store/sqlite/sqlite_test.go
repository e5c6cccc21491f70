package sqlite

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
	"github.com/paddock-dev/paddock/internal/store/storetest"
)

// testWriter sends log lines to the test's log, so a failure shows them.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, testLogger(t))
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "paddock.db")
	return openAt(t, path), path
}

func TestStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestConnectionSettings(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL
		{"busy_timeout", fmt.Sprint(busyTimeout.Milliseconds())},
	}
	for _, tc := range tests {
		for name, db := range map[string]queryRower{"writer": s.w, "reader": s.r} {
			var got string
			if err := db.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got); err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", name, tc.pragma, err)
			}
			if got != tc.want {
				t.Errorf("%s: PRAGMA %s = %q, want %q", name, tc.pragma, got, tc.want)
			}
		}
	}
	// The read pool must refuse writes, so a write sent there by mistake
	// fails loudly instead of racing the writer for the lock.
	if _, err := s.r.ExecContext(ctx, `DELETE FROM api_keys`); err == nil {
		t.Error("the read pool accepted a write")
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paddock.db")
	ctx := t.Context()
	first, err := Open(ctx, path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	sb := &store.Sandbox{ID: "sb-1", Name: "keep", State: api.StateRunning, Labels: map[string]string{"a": "b"}}
	if err := first.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := first.AppendStateChange(ctx, store.StateChange{SandboxID: "sb-1", To: api.StateRunning}); err != nil {
		t.Fatal(err)
	}
	key := &store.Key{ID: "key-1", SecretHash: make([]byte, 32)}
	if err := first.CreateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := openAt(t, path)
	named, err := second.SandboxesByName(ctx, "keep")
	if err != nil || len(named) != 1 {
		t.Fatalf("after reopen: %d named keep, %v", len(named), err)
	}
	got := named[0]
	if got.ID != "sb-1" || got.Labels["a"] != "b" || !got.CreatedAt.Equal(sb.CreatedAt) {
		t.Errorf("after reopen: %+v, want %+v", got, sb)
	}
	h, err := second.StateHistory(ctx, "sb-1")
	if err != nil || len(h) != 1 {
		t.Errorf("history after reopen = %v, %v; want one entry", h, err)
	}
	if _, err := second.KeyByHash(ctx, make([]byte, 32)); err != nil {
		t.Errorf("key after reopen: %v", err)
	}
}

// Two Stores on one file stand for two processes (a daemon and, say, a
// second daemon started by mistake): the busy timeout must absorb their
// contention rather than fail requests.
func TestTwoStoresOneFile(t *testing.T) {
	a, path := openTemp(t)
	b := openAt(t, path)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			sb := &store.Sandbox{ID: fmt.Sprintf("sb-%d", i), State: api.StateRunning}
			if err := s.CreateSandbox(ctx, sb); err != nil {
				errs <- err
				return
			}
			sb.State = api.StateStopped
			if err := s.UpdateSandbox(ctx, sb); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := b.ListSandboxes(ctx, nil)
	if err != nil || len(list) != 40 {
		t.Fatalf("ListSandboxes = %d, %v; want 40", len(list), err)
	}
}

func TestOpenRejects(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		want error
	}{
		{"empty path", "", errdefs.ErrInvalidArgument},
		{"NUL in path", "a\x00b", errdefs.ErrInvalidArgument},
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "x.db"), nil},
		{"a directory", dir, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.path, testLogger(t))
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Open: %v, want %v", err, tc.want)
			}
		})
	}
}

// Characters that mean something in a URI must stay part of the file name.
func TestOpenOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "we?ird#dir %41")
	for _, name := range []string{"a?mode=ro.db", "b#frag.db", "c%20d.db", "e&_txlock=deferred.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			s := openAt(t, path)
			if err := s.CreateSandbox(t.Context(), &store.Sandbox{ID: "x", State: api.StateRunning}); err != nil {
				t.Fatalf("write: %v", err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("database not created at %q", path)
			}
		})
	}
}
