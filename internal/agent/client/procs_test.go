package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// fakeAgent serves h on a unix socket, as something other than the real
// agent could: one sealed by an older daemon, or an impostor.
func fakeAgent(t *testing.T, h http.Handler) *client.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &protos, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := client.New(filepath.Join(dir, "a.sock"))
	t.Cleanup(func() { c.Close() })
	return c
}

func TestProcsOldAgent(t *testing.T) {
	c := fakeAgent(t, http.NewServeMux()) // knows no route: 404
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Procs(ctx); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("procs on an old agent: %v, want failed precondition", err)
	}
	if _, err := c.KillAll(ctx, 0); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("kill-all on an old agent: %v, want failed precondition", err)
	}
}

// TestProcsBoundsAnswer: an answer with more processes than an agent may
// send is cut to the bound, and one that is not JSON is an error.
func TestProcsBoundsAnswer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /paddock/v1/procs", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(api.ProcList{Procs: make([]api.Proc, api.MaxProcs+5)})
	})
	mux.HandleFunc("POST /paddock/v1/procs/kill-all", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("grace") != "1.5s" {
			http.Error(w, `{"message":"bad grace"}`, http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("not json"))
	})
	c := fakeAgent(t, mux)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Procs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Procs) != api.MaxProcs || !list.Truncated {
		t.Fatalf("procs: %d, truncated=%v", len(list.Procs), list.Truncated)
	}
	if _, err := c.KillAll(ctx, 1500*time.Millisecond); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("kill-all with a bad answer: %v, want unavailable", err)
	}
}

// The agent reads its own cgroup and root filesystem: here, the test
// process's, on the real kernel.
func TestUsageFromTheAgent(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := e.c.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.MemoryBytes == 0 || u.CPUNanos == 0 || u.DiskTotalBytes == 0 || u.DiskUsedBytes > u.DiskTotalBytes {
		t.Fatalf("usage: %+v", u)
	}
	old := fakeAgent(t, http.NotFoundHandler())
	if _, err := old.Usage(ctx); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("an agent without the route: %v", err)
	}
}
