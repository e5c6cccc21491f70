package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/egress"
)

// tunnel opens CONNECT target through the sandbox's proxy.
func (e *env) tunnel(t *testing.T, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := dialFrom(t, e.link.NetNS)(context.Background(), "tcp", fmt.Sprintf("%s:%d", e.link.Gateway, egress.ProxyPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c, br
}

// roundTrip sends one request on a tunnel and reads its response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, host string) (*http.Response, string) {
	t.Helper()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("request for %s: %v", host, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closedUnanswered checks the tunnel ends without a byte from upstream.
func closedUnanswered(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(br)
	if len(b) > 0 {
		t.Fatalf("the tunnel carried %q", b)
	}
	if isTimeoutErr(err) {
		t.Fatal("the tunnel stayed open")
	}
}

func isTimeoutErr(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestConnectTunnelChecks(t *testing.T) {
	e := newEnv(t)
	wantRefusal := func(t *testing.T, rule string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if r := e.lastRefusal(); r.Rule == rule && r.Via == "connect" {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("last refusal %+v, want rule %s via connect", e.lastRefusal(), rule)
	}

	t.Run("TLS naming the tunnel's host", func(t *testing.T) {
		c, br := e.tunnel(t, "up.test:443")
		tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "up.test", InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("silence on 443 is not spliced", func(t *testing.T) {
		c, br := e.tunnel(t, "up.test:443")
		time.Sleep(2500 * time.Millisecond) // past the handshake timeout
		tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true})
		if err := tc.Handshake(); err == nil {
			t.Fatal("a ClientHello for another name after a wait went through")
		}
		wantRefusal(t, "handshake-timeout")
	})
	t.Run("neither TLS nor HTTP on 443", func(t *testing.T) {
		c, br := e.tunnel(t, "up.test:443")
		fmt.Fprint(c, "SSH-2.0-probe\r\n")
		closedUnanswered(t, c, br)
		wantRefusal(t, "unknown-protocol")
	})
	t.Run("a request line that stops", func(t *testing.T) {
		c, br := e.tunnel(t, "up.test:80")
		fmt.Fprint(c, "GET / HT")
		closedUnanswered(t, c, br)
		wantRefusal(t, "unknown-protocol")
	})
	t.Run("HTTP naming another host", func(t *testing.T) {
		c, br := e.tunnel(t, "up.test:80")
		resp, body := roundTrip(t, c, br, "other.test")
		if resp.StatusCode != 403 || resp.Header.Get("X-Paddock-Egress-Rule") != "host-mismatch" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		wantRefusal(t, "host-mismatch")
	})
	t.Run("every request on the tunnel is checked", func(t *testing.T) {
		c, br := e.tunnel(t, "up.test:80")
		if resp, body := roundTrip(t, c, br, "up.test"); resp.StatusCode != 200 || body != "hello from up.test" {
			t.Fatalf("first request: %d %q", resp.StatusCode, body)
		}
		if resp, body := roundTrip(t, c, br, "other.test"); resp.StatusCode != 403 || !strings.Contains(body, "host-mismatch") {
			t.Fatalf("second request: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("a WebSocket upgrade in a tunnel and on transparent port 80", func(t *testing.T) {
		for _, via := range []string{"connect", "transparent"} {
			var c net.Conn
			var br *bufio.Reader
			if via == "connect" {
				c, br = e.tunnel(t, "up.test:80")
			} else {
				var err error
				if c, err = dialFrom(t, e.link.NetNS)(context.Background(), "tcp", net.JoinHostPort(e.up.addr, "80")); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				_ = c.SetDeadline(time.Now().Add(15 * time.Second))
				br = bufio.NewReader(c)
			}
			fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: up.test\r\nConnection: keep-alive, Upgrade\r\nUpgrade: echo\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "echo" {
				t.Fatalf("%s: upgrade: %v %v", via, resp, err)
			}
			fmt.Fprint(c, "ping\n")
			if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
				t.Fatalf("%s: echo %q %v", via, line, err)
			}
		}
	})

	// Ports the rules list: HTTP is still checked; protocols where the
	// server speaks first are spliced at once.
	pol, err := egress.NormalizePolicy(egress.Policy{Allow: []string{"up.test"}, Ports: []int{80, 443, 8080, 2222}})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.SetPolicy("egtest1", pol)
	t.Run("HTTP on a listed port", func(t *testing.T) {
		c, br := e.tunnel(t, "up.test:8080")
		if resp, body := roundTrip(t, c, br, "up.test:8080"); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if resp, body := roundTrip(t, c, br, "other.test:8080"); resp.StatusCode != 403 || !strings.Contains(body, "host-mismatch") {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("a server that speaks first on a listed port", func(t *testing.T) {
		start := time.Now()
		c, br := e.tunnel(t, "up.test:2222")
		line, err := br.ReadString('\n')
		if err != nil || line != "220 banner\r\n" {
			t.Fatalf("banner %q %v", line, err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Fatalf("the banner took %s: the proxy waited for the client", d)
		}
		fmt.Fprint(c, "ping\n")
		if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo %q %v", line, err)
		}
	})
}

// bufConn reads through the reader that already holds the proxy's
// response, so nothing read ahead is lost.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
