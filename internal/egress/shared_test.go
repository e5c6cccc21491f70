package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/egress"
)

// sharedEnv is a shared proxy on loopback with two sandboxes attached, and
// an upstream namespace serving HTTP on 80.
type sharedEnv struct {
	srv  *egress.Server
	addr string // the shared listener
	mu   sync.Mutex
	refs []egress.Refusal
}

func (e *sharedEnv) refusals() []egress.Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]egress.Refusal(nil), e.refs...)
}

func newSharedEnv(t *testing.T, maxConns int) *sharedEnv {
	t.Helper()
	requireRoot(t)
	up := newUpstreamPlan(t, 2).start(t)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	})}
	go hs.Serve(up.listen(t, "80"))
	t.Cleanup(func() { hs.Close() })
	upAddr := netip.MustParseAddr(up.addr)
	e := &sharedEnv{}
	e.srv = egress.New(egress.Options{
		Logger:    slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Resolver:  &egress.Resolver{Static: map[string][]netip.Addr{"up.test": {upAddr}, "other.test": {upAddr}}},
		Permitted: []netip.Prefix{up.permit},
		MaxConns:  maxConns,
		OnRefuse: func(r egress.Refusal) {
			e.mu.Lock()
			e.refs = append(e.refs, r)
			e.mu.Unlock()
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.srv.ServeShared(ln) }()
	t.Cleanup(func() {
		e.srv.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeShared: %v", err)
		}
	})
	e.addr = ln.Addr().String()
	for id, allow := range map[string]string{"sbxone": "up.test", "sbxtwo": "other.test"} {
		p, err := egress.NormalizePolicy(egress.Policy{Allow: []string{allow}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.srv.AttachShared(id, "token-of-"+id+"-0123456789", p); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// client goes through the shared proxy with user and password (none if
// user is "").
func (e *sharedEnv) client(user, pass string) *http.Client {
	pu := &url.URL{Scheme: "http", Host: e.addr}
	if user != "" {
		pu.User = url.UserPassword(user, pass)
	}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 10 * time.Second}
}

func fetch(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSharedProxyAuthenticatesEachSandbox(t *testing.T) {
	e := newSharedEnv(t, 0)
	one := e.client("sbxone", "token-of-sbxone-0123456789")
	if code, body := fetch(t, one, "http://up.test/x"); code != 200 || body != "hello from up.test" {
		t.Fatalf("allowed host: %d %q", code, body)
	}
	// The other sandbox's allowed host is not this one's.
	if code, body := fetch(t, one, "http://other.test/"); code != 403 || !strings.Contains(body, "default-deny") {
		t.Fatalf("a host only the other sandbox may reach: %d %q", code, body)
	}
	refs := e.refusals()
	if len(refs) != 1 || refs[0].Sandbox != "sbxone" || refs[0].Host != "other.test" || refs[0].Via != "proxy" {
		t.Fatalf("refusals: %+v", refs)
	}
	two := e.client("sbxtwo", "token-of-sbxtwo-0123456789")
	if code, body := fetch(t, two, "http://other.test/"); code != 200 || body != "hello from other.test" {
		t.Fatalf("the second sandbox's allowed host: %d %q", code, body)
	}
	for name, c := range map[string]*http.Client{
		"no credentials":                e.client("", ""),
		"a wrong token":                 e.client("sbxone", "token-of-sbxone-0123456780"),
		"the other sandbox's token":     e.client("sbxone", "token-of-sbxtwo-0123456789"),
		"an id nobody attached":         e.client("sbxnone", "token-of-sbxone-0123456789"),
		"an empty token for a known id": e.client("sbxone", ""),
	} {
		code, _ := fetch(t, c, "http://up.test/")
		if code != http.StatusProxyAuthRequired {
			t.Errorf("%s: status %d, want 407", name, code)
		}
	}
	if n := len(e.refusals()); n != 1 {
		t.Errorf("requests that named no sandbox were recorded against one: %+v", e.refusals())
	}
	// A detached sandbox's credentials open nothing.
	e.srv.Detach("sbxone")
	if code, _ := fetch(t, e.client("sbxone", "token-of-sbxone-0123456789"), "http://up.test/"); code != http.StatusProxyAuthRequired {
		t.Errorf("after detach: status %d, want 407", code)
	}
}

// rawRequest writes one proxy request on c and reads its status.
func rawRequest(t *testing.T, c net.Conn, br *bufio.Reader, user, pass, target string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", target, nil)
	req.SetBasicAuth(user, pass)
	req.Header.Set("Proxy-Authorization", req.Header.Get("Authorization"))
	req.Header.Del("Authorization")
	if err := req.WriteProxy(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestSharedProxyConnectionBelongsToOneSandbox(t *testing.T) {
	e := newSharedEnv(t, 2)
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, br := dial()
	if code := rawRequest(t, c, br, "sbxone", "token-of-sbxone-0123456789", "http://up.test/"); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	if code := rawRequest(t, c, br, "sbxtwo", "token-of-sbxtwo-0123456789", "http://other.test/"); code != http.StatusProxyAuthRequired {
		t.Fatalf("another sandbox's request on the same connection: %d, want 407", code)
	}
	// That answer closed the connection. The sandbox's connection limit
	// (2) counts its authenticated connections; the other sandbox has its
	// own.
	c2, br2 := dial()
	if code := rawRequest(t, c2, br2, "sbxone", "token-of-sbxone-0123456789", "http://up.test/"); code != 200 {
		t.Fatalf("second connection: %d", code)
	}
	// The first connection's place comes back when the server closes it,
	// which net/http does a moment after the answer and its FIN.
	var c3 net.Conn
	var br3 *bufio.Reader
	for deadline := time.Now().Add(5 * time.Second); ; {
		c3, br3 = dial()
		code := rawRequest(t, c3, br3, "sbxone", "token-of-sbxone-0123456789", "http://up.test/")
		if code == 200 {
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("third connection: %d", code)
		}
		c3.Close()
		time.Sleep(50 * time.Millisecond)
	}
	c4, br4 := dial()
	if code := rawRequest(t, c4, br4, "sbxone", "token-of-sbxone-0123456789", "http://up.test/"); code != http.StatusServiceUnavailable {
		t.Fatalf("a third open connection of a sandbox limited to two: %d, want 503", code)
	}
	c5, br5 := dial()
	if code := rawRequest(t, c5, br5, "sbxtwo", "token-of-sbxtwo-0123456789", "http://other.test/"); code != 200 {
		t.Fatalf("the other sandbox while the first is at its limit: %d", code)
	}
	// A closed connection gives its place back.
	c2.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c6, br6 := dial()
		code := rawRequest(t, c6, br6, "sbxone", "token-of-sbxone-0123456789", "http://up.test/")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a connection closed: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A rule change closes the open connections it refuses.
	p, _ := egress.NormalizePolicy(egress.Policy{Allow: []string{"other.test"}})
	e.srv.SetPolicy("sbxone", p)
	if code := rawRequest(t, c3, br3, "sbxone", "token-of-sbxone-0123456789", "http://up.test/"); code != 403 {
		t.Fatalf("after the rule change: %d, want 403", code)
	}
}
