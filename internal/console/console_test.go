package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://paddock"+path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestPageAndHeaders(t *testing.T) {
	h := New()
	w := serve(h, http.MethodGet, "/", nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Type"), "text/html") || !strings.Contains(w.Body.String(), "<") {
		t.Fatalf("GET /: %d %q %.80q", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	for k, want := range map[string]string{
		"Content-Security-Policy": CSP,
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-cache",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// The policy allows no inline script and no other origin.
	for _, bad := range []string{"'unsafe-eval'", "script-src 'self' 'unsafe-inline'", "*", "http:", "https:"} {
		if strings.Contains(CSP, bad) {
			t.Errorf("the CSP allows %s", bad)
		}
	}
	if w.Header().Get("Set-Cookie") != "" {
		t.Error("the page sets a cookie")
	}
	etag := w.Header().Get("ETag")
	if w := serve(h, http.MethodGet, "/", map[string]string{"If-None-Match": etag}); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("GET / with its ETag: %d, %d bytes; want 304", w.Code, w.Body.Len())
	}
	if w := serve(h, http.MethodHead, "/index.html", nil); w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD /index.html: %d, %d bytes", w.Code, w.Body.Len())
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/console/nothing.js", http.StatusNotFound},
		{http.MethodGet, "/console/../index.html", http.StatusNotFound},
		{http.MethodGet, "/console/", http.StatusNotFound},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/console/app.js", http.StatusMethodNotAllowed},
	} {
		if w := serve(h, tc.method, tc.path, nil); w.Code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, w.Code, tc.want)
		}
	}
}

// TestEveryAssetServed: each embedded file has its URL and a type a
// browser will run (a script served as text/plain with nosniff is not).
func TestEveryAssetServed(t *testing.T) {
	h := New()
	if len(h.files) == 0 {
		t.Fatal("no assets")
	}
	for url, f := range h.files {
		w := serve(h, http.MethodGet, url, nil)
		if w.Code != http.StatusOK || w.Body.Len() != len(f.body) {
			t.Errorf("GET %s: %d, %d bytes", url, w.Code, w.Body.Len())
		}
		ct := w.Header().Get("Content-Type")
		switch {
		case strings.HasSuffix(url, ".js") && !strings.HasPrefix(ct, "text/javascript"):
			t.Errorf("%s served as %q", url, ct)
		case strings.HasSuffix(url, ".css") && !strings.HasPrefix(ct, "text/css"):
			t.Errorf("%s served as %q", url, ct)
		}
	}
	// A build through scripts/build.sh bundles xterm.js; `go test` in a
	// checkout that never ran it does not, and the page copes.
	if h.TerminalBundled() {
		if _, ok := h.files[Prefix+"vendor/addon-fit.js"]; !ok {
			t.Error("xterm.js is bundled without its fit addon")
		}
	}
}

func TestWebSocketBearer(t *testing.T) {
	for _, tc := range []struct {
		upgrade string
		protos  []string
		want    string
	}{
		{"websocket", []string{"paddock, paddock.bearer.pdk_abc"}, "pdk_abc"},
		{"WebSocket", []string{"paddock", "paddock.bearer.pdk_abc"}, "pdk_abc"},
		{"websocket", []string{"paddock"}, ""},
		{"", []string{"paddock, paddock.bearer.pdk_abc"}, ""}, // not an upgrade
		{"websocket", []string{"x.paddock.bearer.pdk_abc"}, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://paddock/v1/sandboxes/x/pty", nil)
		if tc.upgrade != "" {
			r.Header.Set("Upgrade", tc.upgrade)
		}
		for _, p := range tc.protos {
			r.Header.Add("Sec-WebSocket-Protocol", p)
		}
		if got := WebSocketBearer(r); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc, got, tc.want)
		}
	}
}
