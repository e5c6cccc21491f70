package cli

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsoleProxy: the console's port passes the page to anyone on it,
// the API only with the run's token, which never reaches the daemon.
func TestConsoleProxy(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	daemon := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Method+" "+r.URL.Path+" host="+r.Host+" auth="+r.Header.Get("Authorization"))
	})}
	go daemon.Serve(ln)
	t.Cleanup(func() { daemon.Close() })

	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := front.Addr().String()
	srv := &http.Server{Handler: consoleProxy(sock, "tok3n", addr)}
	go srv.Serve(front)
	t.Cleanup(func() { srv.Close() })

	get := func(host, path string, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get(addr, "/", nil); st != 200 || body != "GET / host="+addr+" auth=" {
		t.Errorf("the page: %d %q", st, body)
	}
	if st, _ := get(addr, "/console/app.js", nil); st != 200 {
		t.Errorf("an asset: %d", st)
	}
	if st, body := get(addr, "/v1/sandboxes", nil); st != http.StatusUnauthorized || !strings.Contains(body, "token") {
		t.Errorf("the API without the token: %d %q", st, body)
	}
	if st, _ := get(addr, "/v1/sandboxes", map[string]string{"Authorization": "Bearer tok3"}); st != http.StatusUnauthorized {
		t.Errorf("the API with a wrong token: %d", st)
	}
	if st, body := get(addr, "/v1/sandboxes", map[string]string{"Authorization": "Bearer tok3n"}); st != 200 || body != "GET /v1/sandboxes host="+addr+" auth=" {
		t.Errorf("the API with the token: %d %q (the token must not be passed on)", st, body)
	}
	if st, _ := get(addr, "/v1/sandboxes/x/pty", map[string]string{"Upgrade": "websocket", "Sec-WebSocket-Protocol": "paddock, paddock.bearer.tok3n"}); st == http.StatusUnauthorized {
		t.Error("a WebSocket with the token as subprotocol was refused")
	}
	if st, _ := get(addr, "/mcp", nil); st != http.StatusUnauthorized {
		t.Errorf("MCP without the token: %d", st)
	}
	if st, _ := get(addr, "/sandboxes", map[string]string{"Authorization": "Bearer tok3n"}); st != http.StatusNotFound {
		t.Errorf("a path that is neither: %d", st)
	}
	if st, _ := get("evil.example:80", "/", nil); st != http.StatusMisdirectedRequest {
		t.Errorf("another host name (DNS rebinding): %d", st)
	}
	_, port, _ := net.SplitHostPort(addr)
	if st, _ := get("localhost:"+port, "/", nil); st != 200 {
		t.Errorf("localhost: %d", st)
	}
}

func TestConsoleListensOnLoopbackOnly(t *testing.T) {
	for _, l := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:0", "nohost"} {
		if err := serveConsole(t.Context(), newConsoleCmd(&globals{}), l, "/nonexistent.sock"); err == nil || !strings.Contains(err.Error(), "--listen") {
			t.Errorf("--listen %s: %v; want a refusal", l, err)
		}
	}
}
