package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/server"
)

// These tests drive the HTTP API against a real controller and the real
// agent, run by processbackend as plain child processes: no root, no
// containers (and no isolation).

// apiServer is the API on its two listeners: the unix socket's handler
// (the daemon's owner, no key) and the TCP one (API keys required).
type apiServer struct {
	local, tcp *httptest.Server
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	env := controllertest.New(t, controllertest.Options{})
	s := server.New(server.Options{Controller: env.Controller, Store: env.Store, Images: env.Images, Logger: controllertest.Logger(t)})
	a := &apiServer{local: httptest.NewServer(s.Handler(false)), tcp: httptest.NewServer(s.Handler(true))}
	t.Cleanup(a.local.Close)
	t.Cleanup(a.tcp.Close)
	return a
}

// call sends a JSON request and decodes a JSON answer into out (when not
// nil); it returns the status and the raw body.
func call(t *testing.T, base, key, method, path string, in, out any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

// newKey creates an API key of scope own on the unix socket's handler.
func (a *apiServer) newKey(t *testing.T, name string) string {
	t.Helper()
	var k api.CreatedKey
	if st, raw := call(t, a.local.URL, "", http.MethodPost, "/v1/keys", api.CreateKeyRequest{Name: name}, &k); st != http.StatusCreated {
		t.Fatalf("create key: %d %s", st, raw)
	}
	return k.Secret
}

// execOut runs cmd and returns its stdout and exit code from the NDJSON
// event stream.
func execOut(t *testing.T, base, key, id string, cmd ...string) (string, int) {
	t.Helper()
	st, raw := call(t, base, key, http.MethodPost, "/v1/sandboxes/"+id+"/exec", api.ExecRequest{Cmd: cmd}, nil)
	if st != http.StatusOK {
		t.Fatalf("exec %q: %d %s", cmd, st, raw)
	}
	var out strings.Builder
	code := -100
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("exec event %q: %v", sc.Text(), err)
		}
		switch {
		case ev.Type == api.EventStdout:
			out.Write(ev.Data)
		case ev.Type == api.EventEnd && ev.ExitCode != nil:
			code = *ev.ExitCode
		}
	}
	return out.String(), code
}

func wantError(t *testing.T, what string, st int, raw []byte, wantStatus int, wantCode string) {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(raw, &e); err != nil || st != wantStatus || e.Code != wantCode {
		t.Errorf("%s: %d %s; want %d with code %s", what, st, raw, wantStatus, wantCode)
	}
}

func TestAPILifecycle(t *testing.T) {
	a := newAPIServer(t)
	key := a.newKey(t, "life")
	base := a.tcp.URL

	var sb api.Sandbox
	if st, raw := call(t, base, key, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{Name: "web"}, &sb); st != http.StatusCreated || sb.State != api.StateRunning {
		t.Fatalf("create: %d %s", st, raw)
	}
	if out, code := execOut(t, base, key, "web", "sh", "-c", "echo hi; echo kept > keep"); out != "hi\n" || code != 0 {
		t.Fatalf("exec = %q, %d", out, code)
	}
	if st, raw := call(t, base, key, http.MethodPost, "/v1/sandboxes/web/stop", nil, &sb); st != http.StatusOK || sb.State != api.StateStopped {
		t.Fatalf("stop: %d %s", st, raw)
	}
	if st, raw := call(t, base, key, http.MethodPost, "/v1/sandboxes/web/start", nil, &sb); st != http.StatusOK || sb.State != api.StateRunning {
		t.Fatalf("start: %d %s", st, raw)
	}
	if out, code := execOut(t, base, key, sb.ID, "cat", "keep"); out != "kept\n" || code != 0 {
		t.Errorf("file after stop and start = %q, %d", out, code)
	}
	if st, raw := call(t, base, key, http.MethodDelete, "/v1/sandboxes/web", nil, nil); st >= 300 {
		t.Fatalf("delete: %d %s", st, raw)
	}
	st, raw := call(t, base, key, http.MethodGet, "/v1/sandboxes/"+sb.ID, nil, nil)
	wantError(t, "get after delete", st, raw, http.StatusNotFound, api.CodeNotFound)
}

// TestAPIErrors: user mistakes get their 4xx and stable code.
func TestAPIErrors(t *testing.T) {
	a := newAPIServer(t)
	key := a.newKey(t, "errs")
	base := a.tcp.URL

	st, raw := call(t, base, "", http.MethodGet, "/v1/sandboxes", nil, nil)
	wantError(t, "no key", st, raw, http.StatusUnauthorized, api.CodeUnauthenticated)
	st, raw = call(t, base, "pdk_notakey", http.MethodGet, "/v1/sandboxes", nil, nil)
	wantError(t, "a wrong key", st, raw, http.StatusUnauthorized, api.CodeUnauthenticated)
	st, raw = call(t, base, key, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{Image: "no-such-image"}, nil)
	wantError(t, "unknown image", st, raw, http.StatusNotFound, api.CodeNotFound)
	st, raw = call(t, base, key, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{Name: "Bad Name!"}, nil)
	wantError(t, "bad name", st, raw, http.StatusBadRequest, api.CodeInvalidArgument)

	var sb api.Sandbox
	if st, raw := call(t, base, key, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{Name: "one"}, &sb); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	st, raw = call(t, base, key, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{Name: "one"}, nil)
	wantError(t, "name taken", st, raw, http.StatusConflict, api.CodeConflict)
	st, raw = call(t, base, key, http.MethodPost, "/v1/sandboxes/one/exec", api.ExecRequest{}, nil)
	wantError(t, "empty command", st, raw, http.StatusBadRequest, api.CodeInvalidArgument)
	if out, code := execOut(t, base, key, "one", "no-such-command-here"); code != 127 {
		t.Errorf("missing command: exit %d (%q), want 127", code, out)
	}
}

// TestAPITenancy: a key of scope own sees and touches only what it made.
func TestAPITenancy(t *testing.T) {
	a := newAPIServer(t)
	keyA, keyB := a.newKey(t, "tenant-a"), a.newKey(t, "tenant-b")
	base := a.tcp.URL

	var sb api.Sandbox
	if st, raw := call(t, base, keyA, http.MethodPost, "/v1/sandboxes", api.CreateSandboxRequest{Name: "secret"}, &sb); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	var list api.SandboxList
	if st, raw := call(t, base, keyB, http.MethodGet, "/v1/sandboxes", nil, &list); st != http.StatusOK || len(list.Sandboxes) != 0 {
		t.Errorf("another key lists: %d %s; want nothing", st, raw)
	}
	for _, ref := range []string{sb.ID, "secret"} {
		for _, req := range []struct{ method, path string }{
			{http.MethodGet, "/v1/sandboxes/" + ref},
			{http.MethodPost, "/v1/sandboxes/" + ref + "/stop"},
			{http.MethodDelete, "/v1/sandboxes/" + ref},
			{http.MethodGet, "/v1/sandboxes/" + ref + "/files?path=keep"},
		} {
			st, raw := call(t, base, keyB, req.method, req.path, nil, nil)
			wantError(t, "another key's "+req.method+" "+req.path, st, raw, http.StatusNotFound, api.CodeNotFound)
		}
		st, raw := call(t, base, keyB, http.MethodPost, "/v1/sandboxes/"+ref+"/exec", api.ExecRequest{Cmd: []string{"true"}}, nil)
		wantError(t, "another key's exec", st, raw, http.StatusNotFound, api.CodeNotFound)
	}
	// The owner, and the unix socket (the daemon's owner), still see it running.
	if out, code := execOut(t, base, keyA, "secret", "echo", "mine"); out != "mine\n" || code != 0 {
		t.Errorf("owner's exec = %q, %d", out, code)
	}
	if st, raw := call(t, a.local.URL, "", http.MethodGet, "/v1/sandboxes", nil, &list); st != http.StatusOK || len(list.Sandboxes) != 1 {
		t.Errorf("the unix socket lists: %d %s; want the one sandbox", st, raw)
	}
}

// failingImages fails to list with an error whose text must stay private.
type failingImages struct{ controllertest.Images }

func (failingImages) List(context.Context) ([]*image.Image, error) {
	return nil, errors.New("open /var/lib/paddock/images/index: input/output error")
}

// TestInternalErrorHidden: a 500 tells the client a reference, never the
// error's text, which goes to the daemon's log with that reference.
func TestInternalErrorHidden(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	var logs lockedBuffer
	s := server.New(server.Options{Controller: env.Controller, Store: env.Store, Images: failingImages{env.Images}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv := httptest.NewServer(s.Handler(false))
	t.Cleanup(srv.Close)

	st, raw := call(t, srv.URL, "", http.MethodGet, "/v1/images", nil, nil)
	var e api.Error
	if err := json.Unmarshal(raw, &e); err != nil || st != http.StatusInternalServerError || e.Code != api.CodeInternal {
		t.Fatalf("GET /v1/images: %d %s; want 500 with code internal", st, raw)
	}
	if strings.Contains(string(raw), "/var/lib") || strings.Contains(string(raw), "input/output") {
		t.Errorf("the client sees the internal error's text: %s", raw)
	}
	ref, ok := strings.CutPrefix(e.Message, "internal error (reference ")
	ref, _, _ = strings.Cut(ref, ")")
	if !ok || len(ref) != 12 {
		t.Fatalf("message %q carries no reference", e.Message)
	}
	logged := logs.String()
	if !strings.Contains(logged, ref) || !strings.Contains(logged, "input/output error") {
		t.Errorf("the log lacks the reference %s or the details: %s", ref, logged)
	}
}

// lockedBuffer is a log destination handlers write to while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSocketNamesNoOtherCaller: a request on the unix socket is the
// socket's own caller whatever its headers say (an in-daemon client acts
// for a key in-process, never by naming it in a header).
func TestSocketNamesNoOtherCaller(t *testing.T) {
	a := newAPIServer(t)
	var k api.CreatedKey
	if st, raw := call(t, a.local.URL, "", http.MethodPost, "/v1/keys", api.CreateKeyRequest{Name: "named"}, &k); st != http.StatusCreated {
		t.Fatalf("create key: %d %s", st, raw)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.local.URL+"/v1/sandboxes", strings.NewReader(`{"name":"whose"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Paddock-Caller", k.ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create on the socket with a caller header: %d %s", resp.StatusCode, raw)
	}
	var list api.SandboxList
	if st, raw := call(t, a.tcp.URL, k.Secret, http.MethodGet, "/v1/sandboxes", nil, &list); st != http.StatusOK || len(list.Sandboxes) != 0 {
		t.Errorf("the key named in the header lists %d %s; want nothing (the sandbox is the socket's)", st, raw)
	}
}
