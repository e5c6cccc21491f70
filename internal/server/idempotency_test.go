package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/store"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

func openStore(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// counting is a handler that counts its runs and answers with the count.
type counting struct {
	runs    atomic.Int32
	release chan struct{} // when non-nil, each run waits for it
	size    int           // extra body bytes
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.runs.Add(1)
	if c.release != nil {
		<-c.release
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"run":%d,"body":%q}`, n, body)
	if c.size > 0 {
		_, _ = w.Write([]byte(strings.Repeat(" ", c.size)))
	}
}

func newIdemServer(t *testing.T, st store.Store, h http.Handler) *httptest.Server {
	t.Helper()
	s := &Server{opts: Options{Store: st}, log: slog.New(slog.DiscardHandler), bodies: httpbody.NewBudget(0)}
	srv := httptest.NewServer(s.idempotent(h))
	t.Cleanup(srv.Close)
	return srv
}

type result struct {
	status int
	replay string
	body   string
}

func do(t *testing.T, srv *httptest.Server, method, path, key, body string) result {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return result{}
	}
	if key != "" {
		req.Header.Set(api.IdempotencyKeyHeader, key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Error(err)
		return result{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header.Get(api.IdempotentReplayHeader), string(b)}
}

func TestIdempotencyReplay(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	h := &counting{}
	srv := newIdemServer(t, st, h)

	first := do(t, srv, "POST", "/v1/sandboxes", "k1", `{"a":1}`)
	again := do(t, srv, "POST", "/v1/sandboxes", "k1", `{"a":1}`)
	if first.status != 201 || again.status != 201 || first.body != again.body || first.replay != "" || again.replay != "true" {
		t.Fatalf("first %+v, retry %+v", first, again)
	}
	if h.runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.runs.Load())
	}
	cases := []struct {
		name                    string
		method, path, key, body string
		status                  int
		contains                string
		runs                    int32 // handler runs after the call
	}{
		{"other body", "POST", "/v1/sandboxes", "k1", `{"a":2}`, 409, "different request", 1},
		{"other path", "POST", "/v1/sandboxes/x/stop", "k1", `{"a":1}`, 409, "different request", 1},
		{"other key", "POST", "/v1/sandboxes", "k2", `{"a":1}`, 201, `"run":2`, 2},
		{"no key", "POST", "/v1/sandboxes", "", `{"a":1}`, 201, `"run":3`, 3},
		{"GET ignores keys", "GET", "/v1/sandboxes", "k1", ``, 201, `"run":4`, 4},
		{"not under /v1", "POST", "/other", "k1", `{"a":1}`, 201, `"run":5`, 5},
		{"key too long", "POST", "/v1/sandboxes", strings.Repeat("k", 256), `{}`, 400, "1-255", 5},
		{"key not ASCII", "POST", "/v1/sandboxes", "ké", `{}`, 400, "visible ASCII", 5},
		{"keys route", "POST", "/v1/keys", "k9", `{"name":"a"}`, 400, "secret", 5},
		{"body too large", "PUT", "/v1/sandboxes/x/files", "k8", strings.Repeat("x", maxIdemReqBody+1), 413, "may carry at most 8 MiB", 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := do(t, srv, c.method, c.path, c.key, c.body)
			if got.status != c.status || !strings.Contains(got.body, c.contains) {
				t.Errorf("got %d %s, want %d containing %q", got.status, got.body, c.status, c.contains)
			}
			if n := h.runs.Load(); n != c.runs {
				t.Errorf("handler runs = %d, want %d", n, c.runs)
			}
		})
	}
}

// TestIdempotencyFailuresNotKept: a 5xx or a 429 is passed on but not kept,
// so a retry with the same key runs the call again; the first success is
// kept and replayed from then on.
func TestIdempotencyFailuresNotKept(t *testing.T) {
	for _, failure := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusGatewayTimeout, http.StatusTooManyRequests} {
		t.Run(http.StatusText(failure), func(t *testing.T) {
			st := openStore(t, filepath.Join(t.TempDir(), "db"))
			var runs atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				if n <= 2 {
					w.WriteHeader(failure)
					fmt.Fprintf(w, `{"code":"unavailable","message":"run %d failed"}`, n)
					return
				}
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, `{"run":%d}`, n)
			})
			srv := newIdemServer(t, st, h)
			want := []result{
				{failure, "", `{"code":"unavailable","message":"run 1 failed"}`},
				{failure, "", `{"code":"unavailable","message":"run 2 failed"}`},
				{http.StatusCreated, "", `{"run":3}`},
				{http.StatusCreated, "true", `{"run":3}`},
			}
			for i, w := range want {
				if got := do(t, srv, "POST", "/v1/sandboxes", "k", `{}`); got != w {
					t.Fatalf("call %d: %+v, want %+v", i+1, got, w)
				}
			}
			if runs.Load() != 3 {
				t.Fatalf("handler ran %d times, want 3", runs.Load())
			}
		})
	}
	// A definite answer, even a refusal, is kept.
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	var runs atomic.Int32
	srv := newIdemServer(t, st, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusConflict)
	}))
	do(t, srv, "POST", "/v1/sandboxes/x/stop", "k", ``)
	if got := do(t, srv, "POST", "/v1/sandboxes/x/stop", "k", ``); got.status != http.StatusConflict || got.replay != "true" || runs.Load() != 1 {
		t.Fatalf("a 409 was not kept: %+v, %d runs", got, runs.Load())
	}
}

// Credentials partition keys: the same key from another caller is a
// different request slot.
func TestIdempotencyPerCredential(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	h := &counting{}
	srv := newIdemServer(t, st, h)
	for _, auth := range []string{"Bearer a", "Bearer b"} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/sandboxes", strings.NewReader("{}"))
		req.Header.Set(api.IdempotencyKeyHeader, "same")
		req.Header.Set("Authorization", auth)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if h.runs.Load() != 2 {
		t.Fatalf("two callers with one key: %d runs, want 2", h.runs.Load())
	}
}

// Callers partition keys whatever header carries their credential: two API
// keys sent as X-API-Key (no Authorization header) never share a slot, nor
// does either with the unix socket's caller.
func TestIdempotencyPerCaller(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	h := &counting{}
	s := &Server{opts: Options{Store: st}, log: slog.New(slog.DiscardHandler), bodies: httpbody.NewBudget(0)}
	// As requireKey and localCaller do: the caller is in the context.
	asCaller := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if id := r.Header.Get("X-API-Key"); id != "" {
			ctx = controller.WithCaller(ctx, id, api.KeyScopeOwn)
		}
		s.idempotent(h).ServeHTTP(w, r.WithContext(ctx))
	})
	srv := httptest.NewServer(asCaller)
	t.Cleanup(srv.Close)
	bodies := map[string]string{}
	for _, caller := range []string{"key-a", "key-b", "", "key-a"} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/sandboxes", strings.NewReader("{}"))
		req.Header.Set(api.IdempotencyKeyHeader, "same")
		if caller != "" {
			req.Header.Set("X-API-Key", caller)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if prev, ok := bodies[caller]; ok && prev != string(b) {
			t.Errorf("%q's retry got %s, want its own reply %s", caller, b, prev)
		}
		bodies[caller] = string(b)
	}
	if h.runs.Load() != 3 {
		t.Fatalf("three callers with one key: %d runs, want 3", h.runs.Load())
	}
}

func TestIdempotencyConcurrentRetriesWait(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	h := &counting{release: make(chan struct{})}
	srv := newIdemServer(t, st, h)
	const n = 5
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = do(t, srv, "POST", "/v1/sandboxes", "race", `{}`)
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(h.release)
	wg.Wait()
	if h.runs.Load() != 1 {
		t.Fatalf("handler ran %d times for %d concurrent calls with one key", h.runs.Load(), n)
	}
	replays := 0
	for _, r := range results {
		if r.status != 201 || r.body != results[0].body {
			t.Fatalf("results differ: %+v", results)
		}
		if r.replay == "true" {
			replays++
		}
	}
	if replays != n-1 {
		t.Fatalf("%d replays, want %d", replays, n-1)
	}
}

// A restart (a new middleware on the same database) still replays finished
// calls, and refuses to rerun a call that was in flight when it stopped.
func TestIdempotencyAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	st := openStore(t, path)
	h := &counting{}
	srv := newIdemServer(t, st, h)
	first := do(t, srv, "POST", "/v1/sandboxes", "done", `{}`)
	// A call that never finished under an earlier daemon run.
	now := time.Now()
	if _, _, err := st.BeginIdempotent(t.Context(), &store.IdempotencyRecord{
		Key: idemID(&http.Request{Header: http.Header{}}, "cut"), Fingerprint: fingerprint(
			&http.Request{Method: "POST", URL: mustURL(t, "/v1/sandboxes")}, []byte(`{}`)),
		Method: "POST", Path: "/v1/sandboxes", Owner: "an-earlier-run", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	srv.Close()

	st2 := openStore(t, path)
	h2 := &counting{}
	srv2 := newIdemServer(t, st2, h2)
	if got := do(t, srv2, "POST", "/v1/sandboxes", "done", `{}`); got.body != first.body || got.replay != "true" {
		t.Fatalf("after restart: %+v, want a replay of %+v", got, first)
	}
	if got := do(t, srv2, "POST", "/v1/sandboxes", "cut", `{}`); got.status != 409 || !strings.Contains(got.body, "outcome is unknown") {
		t.Fatalf("retry of a cut call: %+v", got)
	}
	if h2.runs.Load() != 0 {
		t.Fatalf("handler ran %d times after the restart, want 0", h2.runs.Load())
	}
}

func TestIdempotencyLargeResponseNotKept(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	h := &counting{size: maxIdemRespBody}
	srv := newIdemServer(t, st, h)
	first := do(t, srv, "POST", "/v1/sandboxes", "big", `{}`)
	if first.status != 201 || len(first.body) < maxIdemRespBody {
		t.Fatalf("first call: %d, %d bytes", first.status, len(first.body))
	}
	again := do(t, srv, "POST", "/v1/sandboxes", "big", `{}`)
	if again.status != 409 || !strings.Contains(again.body, "not kept") || h.runs.Load() != 1 {
		t.Fatalf("retry: %d %s, runs %d", again.status, again.body, h.runs.Load())
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestIdempotencyPurge: the server's retention forgets results past their
// expiry and keeps the others.
func TestIdempotencyPurge(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "p.db"))
	s := &Server{opts: Options{Store: st}, log: slog.New(slog.DiscardHandler)}
	now := time.Now().UTC().Round(0)
	for key, created := range map[string]time.Time{"old": now.Add(-2 * idemTTL), "new": now} {
		rec := &store.IdempotencyRecord{Key: key, Fingerprint: "f", Method: "POST", Path: "/v1/x", Owner: "o",
			CreatedAt: created, ExpiresAt: created.Add(idemTTL)}
		if _, created, err := st.BeginIdempotent(t.Context(), rec); err != nil || !created {
			t.Fatalf("begin %s: %v %v", key, created, err)
		}
	}
	s.purgeIdempotency(t.Context())
	if n, err := st.PurgeIdempotency(t.Context(), time.Now()); err != nil || n != 0 {
		t.Errorf("%d expired records left after the server's purge (%v)", n, err)
	}
	again := &store.IdempotencyRecord{Key: "new", Fingerprint: "f", Method: "POST", Path: "/v1/x", Owner: "o",
		CreatedAt: now, ExpiresAt: now.Add(idemTTL)}
	if existing, created, err := st.BeginIdempotent(t.Context(), again); err != nil || created || existing == nil {
		t.Errorf("the unexpired record went with the purge: created %v, %v", created, err)
	}
}
