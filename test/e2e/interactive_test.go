package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// previewServer is a small HTTP server for inside a sandbox: it echoes
// what it was sent, streams /stream in two chunks (the second only once
// /tmp/go exists, so a test proves streaming without timing anything),
// and answers an Upgrade with 101 and then echoes raw bytes. It listens
// on 127.0.0.1 only: previews must reach loopback-only servers.
const previewServer = `
import http.server, socketserver, os, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:
                b = self.connection.recv(4096)
                if not b:
                    return
                self.connection.sendall(b)
        if self.path == "/stream":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            def chunk(s):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(s), s))
                self.wfile.flush()
            chunk(b"first\n")
            while not os.path.exists("/tmp/go"):
                time.sleep(0.05)
            chunk(b"second\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        body = ("path=%s cookie=%s token=%s\n" % (self.path, self.headers.get("Cookie"), self.headers.get("X-Paddock-Preview-Token"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
# gVisor under a small pids limit may refuse threads: "single" serves one
# request at a time.
import sys
(http.server.HTTPServer if "single" in sys.argv else S)(("127.0.0.1", 8000), H).serve_forever()
`

// startPreviewServer starts previewServer in the background and waits
// until the preview answers.
func startPreviewServer(t *testing.T, d *daemon, id string, args ...string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	if _, err := d.client.WriteFile(ctx, id, "/tmp/srv.py", strings.NewReader(previewServer), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := execOut(t, d, id, "sh", "-c", "nohup python3 /tmp/srv.py "+strings.Join(args, " ")+" >/tmp/srv.log 2>&1 &"); code != 0 {
		t.Fatalf("start server: %d %s", code, out)
	}
}

// previewTarget splits a preview URL into the listener address to dial and
// the Host header to send: the test cannot rely on *.localhost resolving.
func previewTarget(t *testing.T, raw string) (addr, host string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("preview url %q: %v", raw, err)
	}
	return net.JoinHostPort("127.0.0.1", u.Port()), u.Host
}

func previewGet(t *testing.T, addr, host, path string, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, time.Minute), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitPreview(t *testing.T, d *daemon, id, addr, host string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := previewGet(t, addr, host, "/ready", nil)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			log, _ := execOut(t, d, id, "sh", "-c", "cat /tmp/srv.log; ls /proc")
			t.Fatalf("preview never answered: %d %s\nserver log: %s", code, body, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPreview(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Name: "web"})
	startPreviewServer(t, d, sb.ID)

	// The CLI prints the host-form URL.
	rawURL := strings.TrimSpace(d.must("expose", "web", "8000"))
	wantPrefix := "http://8000-" + sb.ID + "-"
	if !strings.HasPrefix(rawURL, wantPrefix) || !strings.Contains(rawURL, ".localhost:") {
		t.Fatalf("expose printed %q, want %s<token>.localhost:<port>/", rawURL, wantPrefix)
	}
	addr, host := previewTarget(t, rawURL)
	tok := strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(host, ".", 2)[0], "8000-"+sb.ID+"-"), "")
	if len(tok) < 26 {
		t.Fatalf("token %q is shorter than 128 bits of base32", tok)
	}
	before, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	waitPreview(t, d, sb.ID, addr, host)

	t.Run("http", func(t *testing.T) {
		code, body := previewGet(t, addr, host, "/hello?x=1", nil)
		if code != http.StatusOK || !strings.Contains(body, "path=/hello?x=1") {
			t.Fatalf("GET = %d %q", code, body)
		}
	})

	t.Run("activity", func(t *testing.T) {
		after, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !after.LastActivityAt.After(before.LastActivityAt) {
			t.Fatalf("preview traffic did not count as activity: %v then %v", before.LastActivityAt, after.LastActivityAt)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctxT(t, time.Minute), http.MethodGet, "http://"+addr+"/stream", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if err != nil || line != "first\n" {
			t.Fatalf("first chunk = %q, %v", line, err)
		}
		// The server sends the rest only now: the first chunk came through
		// while the response was still open.
		if _, code := execOut(t, d, sb.ID, "touch", "/tmp/go"); code != 0 {
			t.Fatal("touch /tmp/go failed")
		}
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "second\n" {
			t.Fatalf("rest = %q, %v", rest, err)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", host)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade answer: %v %v", resp, err)
		}
		for _, msg := range []string{"ping", "pong-pong"} {
			if _, err := conn.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
				t.Fatalf("echo = %q, %v", got, err)
			}
		}
	})

	t.Run("path form", func(t *testing.T) {
		prefix := "/preview/" + sb.ID + "/8000"
		code, body := previewGet(t, addr, "127.0.0.1", prefix+"/p", http.Header{api.PreviewTokenHeader: {tok}})
		if code != http.StatusOK || !strings.Contains(body, "path=/p ") || !strings.Contains(body, "token=None") {
			t.Fatalf("path form with header = %d %q (the token must not reach the app)", code, body)
		}
		// A token in the query becomes a path-scoped cookie and is taken
		// out of the URL by a redirect.
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+prefix+"/q?a=b&"+api.PreviewTokenParam+"="+tok, nil)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusFound || strings.Contains(loc, tok) || len(resp.Cookies()) != 1 {
			t.Fatalf("query token: status %d location %q cookies %v", resp.StatusCode, loc, resp.Cookies())
		}
		ck := resp.Cookies()[0]
		code, body = previewGet(t, addr, "127.0.0.1", loc, http.Header{"Cookie": {ck.Name + "=" + ck.Value + "; app=1"}})
		if code != http.StatusOK || !strings.Contains(body, "path=/q?a=b") || !strings.Contains(body, "cookie=app=1") {
			t.Fatalf("path form with cookie = %d %q (only the app's cookie may reach it)", code, body)
		}
		if code, _ := previewGet(t, addr, "127.0.0.1", prefix+"/p", nil); code != http.StatusNotFound {
			t.Fatalf("path form without a token = %d, want 404", code)
		}
	})

	t.Run("nothing listening is 502", func(t *testing.T) {
		p, err := d.client.Expose(ctxT(t, time.Minute), sb.ID, 9999)
		if err != nil {
			t.Fatal(err)
		}
		a, h := previewTarget(t, p.URL)
		code, body := previewGet(t, a, h, "/", nil)
		if code != http.StatusBadGateway || !strings.Contains(body, "nothing is listening on port 9999") {
			t.Fatalf("GET = %d %q, want 502 saying nothing listens on 9999", code, body)
		}
	})

	t.Run("wrong token is 404 like a missing sandbox", func(t *testing.T) {
		_, missingBody := previewGet(t, addr, "8000-zzzzzzzzzzzzzzzzzzzz-"+strings.Repeat("a", 26)+".localhost", "/", nil)
		cases := []struct{ name, host string }{
			{"wrong token", "8000-" + sb.ID + "-" + strings.Repeat("a", 26) + ".localhost"},
			{"short token", "8000-" + sb.ID + "-abc.localhost"},
			{"other port", "8001-" + sb.ID + "-" + tok + ".localhost"},
			{"missing sandbox", "8000-zzzzzzzzzzzzzzzzzzzz-" + tok + ".localhost"},
			{"other domain", "8000-" + sb.ID + "-" + tok + ".example.com"},
		}
		for _, tc := range cases {
			code, body := previewGet(t, addr, tc.host, "/", nil)
			if code != http.StatusNotFound || body != missingBody {
				t.Errorf("%s: %d %q, want 404 %q", tc.name, code, body, missingBody)
			}
		}
	})

	t.Run("previews list", func(t *testing.T) {
		out := d.must("previews", "web", "--json")
		var pl api.PreviewList
		if err := json.Unmarshal([]byte(out), &pl); err != nil || len(pl.Previews) != 2 || pl.Previews[0].Port != 8000 || pl.Previews[0].Token != "" {
			t.Fatalf("previews = %s (%v); want ports 8000 and 9999 without tokens", out, err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, args := range [][]string{{"expose", "web", "0"}, {"expose", "web", "65536"}, {"expose", "web", "http"}, {"unexpose", "web", "7"}, {"expose", "nope", "80"}} {
			if _, stderr, code := d.run(args...); code == 0 || stderr == "" {
				t.Errorf("paddock %v: exit %d, stderr %q; want a failure with a message", args, code, stderr)
			}
		}
		if _, err := d.client.Expose(ctxT(t, time.Minute), sb.ID, 70000); !errors.Is(err, paddock.ErrInvalidArgument) {
			t.Errorf("expose 70000: %v", err)
		}
	})

	t.Run("revoked token is 404", func(t *testing.T) {
		d.must("unexpose", "web", "8000")
		code, body := previewGet(t, addr, host, "/", nil)
		if code != http.StatusNotFound || !strings.Contains(body, "no such preview") {
			t.Fatalf("after unexpose: %d %q", code, body)
		}
		// Exposing again gives a new token; the old one stays dead.
		p, err := d.client.Expose(ctxT(t, time.Minute), sb.ID, 8000)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p.URL, tok) {
			t.Fatal("a new expose reused the revoked token")
		}
		if code, _ := previewGet(t, addr, host, "/", nil); code != http.StatusNotFound {
			t.Fatalf("old token after re-expose: %d", code)
		}
		a, h := previewTarget(t, p.URL)
		if code, _ := previewGet(t, a, h, "/", nil); code != http.StatusOK {
			t.Fatalf("new token: %d", code)
		}
	})

	t.Run("tokens never logged", func(t *testing.T) {
		if strings.Contains(d.logs.String(), tok) {
			t.Fatal("a preview token appears in the daemon's log")
		}
	})
}

// TestPreviewGVisor: under gVisor the agent's dial goes through gVisor's
// own network stack; the port must still be reachable.
func TestPreviewGVisor(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Runtime: api.RuntimeGVisor})
	startPreviewServer(t, d, sb.ID, "single")
	p, err := d.client.Expose(ctxT(t, time.Minute), sb.ID, 8000)
	if err != nil {
		t.Fatal(err)
	}
	addr, host := previewTarget(t, p.URL)
	waitPreview(t, d, sb.ID, addr, host)
	if code, body := previewGet(t, addr, host, "/g", nil); code != http.StatusOK || !strings.Contains(body, "path=/g") {
		t.Fatalf("GET = %d %q", code, body)
	}
	p2, err := d.client.Expose(ctxT(t, time.Minute), sb.ID, 9999)
	if err != nil {
		t.Fatal(err)
	}
	a2, h2 := previewTarget(t, p2.URL)
	if code, body := previewGet(t, a2, h2, "/", nil); code != http.StatusBadGateway || !strings.Contains(body, "nothing is listening") {
		t.Fatalf("closed port under gVisor = %d %q", code, body)
	}
}

// collectWatch reads events into a channel until the watcher ends.
func collectWatch(w *paddock.Watcher) (<-chan api.WatchEvent, <-chan error) {
	evs, errc := make(chan api.WatchEvent, 1024), make(chan error, 1)
	go func() {
		defer close(evs)
		for {
			ev, err := w.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					errc <- err
				}
				return
			}
			evs <- ev
		}
	}()
	return evs, errc
}

func waitEvent(t *testing.T, evs <-chan api.WatchEvent, want api.WatchEvent, seen *[]api.WatchEvent) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("watch ended before %+v; saw %+v", want, *seen)
			}
			*seen = append(*seen, ev)
			if ev.Type == want.Type && ev.Path == want.Path {
				return
			}
		case <-timeout:
			t.Fatalf("no %+v within a minute; saw %+v", want, *seen)
		}
	}
}

func TestWatch(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	ctx := ctxT(t, 3*time.Minute)

	t.Run("missing path", func(t *testing.T) {
		_, err := d.client.Watch(ctx, sb.ID, paddock.WatchOptions{Path: "/no/such/dir"})
		if !errors.Is(err, paddock.ErrNotFound) {
			t.Fatalf("watch of a missing path: %v, want ErrNotFound", err)
		}
		_, stderr, code := d.run("watch", sb.ID, "/no/such/dir")
		if code == 0 || !strings.Contains(stderr, "not found") {
			t.Fatalf("CLI: exit %d %q", code, stderr)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, o := range []paddock.WatchOptions{
			{Path: ""},
			{Path: "/tmp", Include: []string{"["}},
			{Path: "/tmp", User: "Bad User"},
			{Path: "/etc/passwd"},
		} {
			if _, err := d.client.Watch(ctx, sb.ID, o); !errors.Is(err, paddock.ErrInvalidArgument) {
				t.Errorf("watch %+v: %v, want ErrInvalidArgument", o, err)
			}
		}
	})

	w, err := d.client.Watch(ctx, sb.ID, paddock.WatchOptions{Path: "/home/user", Recursive: true, Exclude: []string{"*.pyc", "cache"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	evs, errc := collectWatch(w)
	if _, code := execOut(t, d, sb.ID, "sh", "-c",
		"cd /home/user && mkdir -p src/pkg cache && echo x > cache/skip.txt && echo y > src/a.pyc && echo z > src/pkg/m.py"); code != 0 {
		t.Fatal("changes failed")
	}
	var seen []api.WatchEvent
	// Once the file in the new directory is reported, that directory is
	// watched too; only then are its changes expected (a file moved away
	// before the watch reaches its directory is, rightly, never seen there).
	for _, want := range []api.WatchEvent{
		{Type: "create", Path: "src"},
		{Type: "create", Path: "src/pkg/m.py"},
	} {
		waitEvent(t, evs, want, &seen)
	}
	if _, code := execOut(t, d, sb.ID, "sh", "-c",
		"cd /home/user && mv src/pkg/m.py src/n.py && chmod 600 src/n.py && rm src/n.py && echo done > last"); code != 0 {
		t.Fatal("changes failed")
	}
	for _, want := range []api.WatchEvent{
		{Type: "rename", Path: "src/pkg/m.py"},
		{Type: "create", Path: "src/n.py"},
		{Type: "chmod", Path: "src/n.py"},
		{Type: "remove", Path: "src/n.py"},
		{Type: "create", Path: "last"},
	} {
		waitEvent(t, evs, want, &seen)
	}
	for _, ev := range seen {
		if strings.HasSuffix(ev.Path, ".pyc") || strings.HasPrefix(ev.Path, "cache") || strings.HasPrefix(ev.Path, "/") {
			t.Errorf("event %+v should have been excluded or is not relative", ev)
		}
	}

	// Stopping the sandbox ends the watch cleanly with an end event.
	if _, err := d.client.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	var end api.WatchEvent
	for ev := range evs {
		end = ev
	}
	select {
	case err := <-errc:
		t.Fatalf("watch broke instead of ending: %v", err)
	default:
	}
	if end.Type != api.WatchEnd || !strings.Contains(end.Reason, "stop") {
		t.Fatalf("last event = %+v, want an end event saying the sandbox stopped", end)
	}
}

// unread holds, per terminal, what readUntil read past the text it
// waited for. A terminal's output arrives in chunks of whatever the agent
// read at once, so two lines printed back to back often come in one chunk;
// the next readUntil must still see the second.
var unread sync.Map // io.Reader -> string

// takeUnread returns and forgets what was read from r past the last match.
func takeUnread(r io.Reader) string {
	v, ok := unread.LoadAndDelete(r)
	if !ok {
		return ""
	}
	return v.(string)
}

// readUntil reads terminal output until it contains want, and returns the
// output up to and including it; the rest is kept for the next read.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var (
		mu  sync.Mutex // buf is written by the reader below and read on a timeout
		buf bytes.Buffer
	)
	buf.WriteString(takeUnread(r))
	split := func() string {
		mu.Lock()
		defer mu.Unlock()
		s := buf.String()
		i := strings.Index(s, want)
		if i < 0 {
			return ""
		}
		end := i + len(want)
		if end < len(s) {
			unread.Store(r, s[end:])
		}
		return s[:end]
	}
	if got := split(); got != "" {
		return got
	}
	done := make(chan error, 1)
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			found := strings.Contains(buf.String(), want)
			mu.Unlock()
			if found {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("terminal output ended (%v) before %q: %q", err, want, buf.String())
		}
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		// What was read says whether the output stopped or went another way.
		t.Fatalf("no %q in terminal output within a minute; read since the last match: %q", want, buf.String())
	}
	return split()
}

func TestTerminal(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Name: "term"})
	ctx := ctxT(t, 5*time.Minute)

	t.Run("shell, resize, signal, exit", func(t *testing.T) {
		term, err := d.client.OpenTerminal(ctx, sb.ID, paddock.TerminalOptions{Cols: 90, Rows: 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { term.Close() })
		fmt.Fprint(term, "echo sum-$((6*7)); stty size\n")
		readUntil(t, term, "sum-42")
		readUntil(t, term, "20 90")
		if err := term.Resize(ctx, 120, 33); err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(term, "stty size\n")
		readUntil(t, term, "33 120")
		// Ctrl-C interrupts the foreground job, not the shell.
		fmt.Fprint(term, "sleep 1000\n")
		// A SIGINT before sleep runs would interrupt the shell's command
		// list instead, so wait for sleep to be the foreground job.
		for deadline := time.Now().Add(time.Minute); ; {
			if _, code := execOut(t, d, sb.ID, "sh", "-c", "grep -qx sleep /proc/[0-9]*/comm"); code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("sleep never started in the terminal")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := term.Signal(ctx, "SIGINT"); err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(term, "echo after-$?\n")
		readUntil(t, term, "after-130")
		if err := term.Signal(ctx, "SIGHUP-NOPE"); err != nil {
			t.Fatal(err) // refused by the daemon as an error message, not fatal to the terminal
		}
		fmt.Fprint(term, "exit 7\n")
		ex, err := term.Wait(ctx)
		if err != nil || ex.ExitCode != 7 {
			t.Fatalf("Wait = %+v, %v; want exit 7", ex, err)
		}
	})

	t.Run("disconnect mid-stream and reattach", func(t *testing.T) {
		term, err := d.client.OpenTerminal(ctx, sb.ID, paddock.TerminalOptions{
			Cmd: []string{"sh", "-c", "i=0; while [ $i -lt 400 ]; do echo line-$i; i=$((i+1)); sleep 0.01; done; echo marker-end; read x; echo got-$x; exit 4"},
		})
		if err != nil {
			t.Fatal(err)
		}
		id := term.ID()
		readUntil(t, term, "line-5")
		term.Close() // while it is still printing
		ts, err := d.client.Terminals(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, x := range ts {
			found = found || (x.ID == id && !x.Exited)
		}
		if !found {
			t.Fatalf("terminal %s is gone after its client left: %+v", id, ts)
		}
		again, err := d.client.AttachTerminal(ctx, sb.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { again.Close() })
		// The replay holds what was printed while nobody watched.
		out := readUntil(t, again, "marker-end")
		if !strings.Contains(out, "line-399") {
			t.Fatalf("replay lacks output from while detached: %q", out[max(0, len(out)-200):])
		}
		fmt.Fprint(again, "hello\n")
		readUntil(t, again, "got-hello")
		ex, err := again.Wait(ctx)
		if err != nil || ex.ExitCode != 4 {
			t.Fatalf("Wait = %+v, %v", ex, err)
		}
		if _, err := d.client.AttachTerminal(ctx, sb.ID, "tnosuchterm"); !errors.Is(err, paddock.ErrNotFound) {
			t.Fatalf("attach to a missing terminal: %v", err)
		}
	})

	t.Run("50 terminals at once", func(t *testing.T) {
		const n = 50
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				term, err := d.client.OpenTerminal(ctx, sb.ID, paddock.TerminalOptions{Cmd: []string{"sh", "-c", fmt.Sprintf("read x; echo t%d-$x", i)}})
				if err != nil {
					errs <- fmt.Errorf("terminal %d: %w", i, err)
					return
				}
				defer term.Close()
				fmt.Fprint(term, "ok\n")
				want := fmt.Sprintf("t%d-ok", i)
				var buf bytes.Buffer
				_, _ = io.Copy(&buf, term)
				if !strings.Contains(buf.String(), want) {
					errs <- fmt.Errorf("terminal %d printed %q, want %q", i, buf.String(), want)
					return
				}
				if ex, err := term.Exit(); err != nil || ex.ExitCode != 0 {
					errs <- fmt.Errorf("terminal %d: exit %+v %v", i, ex, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, o := range []paddock.TerminalOptions{
			{Cols: 5000, Rows: 10},
			{Cmd: []string{"no-such-command-here"}},
			{User: "Not A User"},
		} {
			if _, err := d.client.OpenTerminal(ctx, sb.ID, o); err == nil {
				t.Errorf("OpenTerminal(%+v) succeeded", o)
			}
		}
		if _, err := d.client.OpenTerminal(ctx, "nope", paddock.TerminalOptions{}); !errors.Is(err, paddock.ErrNotFound) {
			t.Errorf("terminal in a missing sandbox: %v", err)
		}
	})

	t.Run("cli shell", func(t *testing.T) {
		out, stderr, code := d.runStdin([]byte("echo cli-$((2+3))\nexit 3\n"), "shell", "term")
		if code != 3 || !strings.Contains(out, "cli-5") {
			t.Fatalf("shell: exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		out, _, code = d.runStdin([]byte("echo piped-end\n"), "shell", "term")
		if code != 0 || !strings.Contains(out, "piped-end") {
			t.Fatalf("shell ended by stdin EOF: exit %d %q", code, out)
		}
	})
}
