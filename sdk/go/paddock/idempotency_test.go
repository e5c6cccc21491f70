package paddock

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// TestIdempotencyKeyHeader: which key each call carries, from a fixed key,
// a base, both, or neither; reads carry none.
func TestIdempotencyKeyHeader(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // "METHOD path?query" -> key
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.RequestURI()] = r.Header.Get(api.IdempotencyKeyHeader)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"sb1"}`)
	}))
	t.Cleanup(srv.Close)
	c := &Client{URL: srv.URL}
	key := func(ctx context.Context, call func(ctx context.Context) error, want string) string {
		t.Helper()
		if err := call(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		k, ok := seen[want]
		if !ok {
			t.Fatalf("no request %s among %v", want, seen)
		}
		return k
	}
	create := func(ctx context.Context) error { _, err := c.Create(ctx, api.CreateSandboxRequest{}); return err }
	stop := func(ctx context.Context) error { _, err := c.Stop(ctx, "sb1"); return err }
	get := func(ctx context.Context) error { _, err := c.Get(ctx, "sb1"); return err }
	bg := context.Background()

	if k := key(bg, create, "POST /v1/sandboxes"); k != "" {
		t.Errorf("no key given, sent %q", k)
	}
	if k := key(WithIdempotencyKey(bg, "fixed"), create, "POST /v1/sandboxes"); k != "fixed" {
		t.Errorf("WithIdempotencyKey sent %q", k)
	}
	based := WithIdempotencyKeyBase(bg, "task-7")
	k1 := key(based, create, "POST /v1/sandboxes")
	k2 := key(based, stop, "POST /v1/sandboxes/sb1/stop")
	if !strings.HasPrefix(k1, "task-7.") || len(k1) != len("task-7.")+16 || !strings.HasPrefix(k2, "task-7.") || k1 == k2 {
		t.Errorf("derived keys %q and %q: want task-7.<16 hex>, one per call", k1, k2)
	}
	if again := key(based, create, "POST /v1/sandboxes"); again != k1 {
		t.Errorf("the same call derived %q, then %q", k1, again)
	}
	if k := key(WithIdempotencyKey(based, "fixed"), create, "POST /v1/sandboxes"); k != "fixed" {
		t.Errorf("a fixed key with a base: sent %q, want the fixed key", k)
	}
	if k := key(based, get, "GET /v1/sandboxes/sb1"); k != "" {
		t.Errorf("a read carried %q", k)
	}
}
