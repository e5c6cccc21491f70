package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTCPRouter(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	}
	h := tcpRouter(named("paddock"), named("e2b"), named("console"))
	for _, tc := range []struct {
		what, host, path string
		hdr              map[string]string
		want             string
	}{
		{"Paddock's API", "localhost", "/v1/sandboxes", nil, "paddock"},
		{"Paddock's API root", "localhost", "/v1", nil, "paddock"},
		{"MCP", "localhost", "/mcp", nil, "paddock"},
		{"E2B's API", "localhost", "/sandboxes", nil, "e2b"},
		{"E2B's v2 API", "localhost", "/v2/sandboxes", nil, "e2b"},
		{"not a /v1 path", "localhost", "/v10/x", nil, "e2b"},
		{"the console's page", "localhost", "/", nil, "console"},
		{"the console's assets", "localhost", "/console/app.js", nil, "console"},
		{"a sandbox's / by host", "8080-abc123.localhost:3000", "/", nil, "e2b"},
		{"unknown path", "localhost", "/favicon.ico", nil, "e2b"},
		{"a sandbox's /v1 by header", "localhost", "/v1/sandboxes", map[string]string{"E2b-Sandbox-Id": "abc123", "E2b-Sandbox-Port": "49983"}, "e2b"},
		{"a sandbox's /mcp by host", "8080-abc123.localhost:3000", "/mcp", nil, "e2b"},
		{"a malformed sandbox address", "localhost", "/v1/sandboxes", map[string]string{"E2b-Sandbox-Port": "0"}, "e2b"},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://"+tc.host+tc.path, nil)
		r.Host = tc.host
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Body.String(); got != tc.want {
			t.Errorf("%s (%s %s): served by %s, want %s", tc.what, tc.host, tc.path, got, tc.want)
		}
	}
}

func TestSocketRouter(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	}
	h := socketRouter(named("paddock"), named("console"))
	for path, want := range map[string]string{
		"/": "console", "/console/app.css": "console", "/v1/sandboxes": "paddock", "/mcp": "paddock", "/other": "paddock",
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://paddock"+path, nil))
		if got := w.Body.String(); got != want {
			t.Errorf("%s: served by %s, want %s", path, got, want)
		}
	}
}
