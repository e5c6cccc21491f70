package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/workspace/wsh"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// fakeDaemon answers the few API calls a session's default sandbox needs:
// create, and a delete that takes a while, as a loaded daemon's would.
type fakeDaemon struct {
	mu      sync.Mutex
	created []string
	deleted []string
}

func (f *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
		f.mu.Lock()
		id := "sbx" + strings.Repeat("a", 19) + string(rune('a'+len(f.created)%26))
		f.created = append(f.created, id)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.Sandbox{ID: id, State: api.StateRunning})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/sandboxes/"):
		time.Sleep(30 * time.Millisecond)
		f.mu.Lock()
		f.deleted = append(f.deleted, strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/"))
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"not here"}}`))
	}
}

func (f *fakeDaemon) counts() (created, deleted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.created), len(f.deleted)
}

// TestRunReturnsAfterTheDefaultIsDestroyed checks that Run, whose return
// ends a stdio server's process, comes back only once the session's default
// sandbox has been destroyed, whichever of the session's own end and Run's
// close handles it. Before that was so, the process could exit with the
// destroy still in flight and leave the sandbox behind.
func TestRunReturnsAfterTheDefaultIsDestroyed(t *testing.T) {
	f := &fakeDaemon{}
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	for i := range 50 {
		s := New(Options{Client: &paddock.Client{URL: hs.URL}})
		st, ct := mcpsdk.NewInMemoryTransports()
		ran := make(chan error, 1)
		go func() { ran <- s.Run(context.Background(), st) }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		// The read fails (the fake has no files) but creates the default.
		if _, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "x"}}); err != nil {
			cancel()
			t.Fatal(err)
		}
		_ = cs.Close()
		select {
		case err := <-ran:
			if err != nil {
				t.Logf("run %d: %v", i, err)
			}
		case <-ctx.Done():
			cancel()
			t.Fatalf("run %d: Run did not return after the client closed", i)
		}
		cancel()
		if c, d := f.counts(); c != i+1 || d != i+1 {
			t.Fatalf("run %d: Run returned with %d defaults created and %d destroyed", i, c, d)
		}
	}
}

// TestShellToolsAreTheExecutors: workspace_run tells a model the shell
// executor's tools; each it names must be one the executor has.
func TestShellToolsAreTheExecutors(t *testing.T) {
	have := map[string]bool{}
	for _, n := range wsh.Builtins() {
		have[n] = true
	}
	for _, n := range ShellTools {
		if !have[n] {
			t.Errorf("workspace_run names %s, which the shell executor does not have", n)
		}
	}
}
