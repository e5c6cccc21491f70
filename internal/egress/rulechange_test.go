package egress_test

import (
	"bufio"
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

// endsSoon reads r until it ends and fails if it has not within 5 s.
func endsSoon(t *testing.T, c net.Conn, r io.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, r)
	if isTimeoutErr(err) {
		t.Fatal("the connection outlived the rule change")
	}
}

// staysOpen checks a connection still carries data.
func staysOpen(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "tick\n" {
		t.Fatalf("connection closed: %q %v", line, err)
	}
}

// TestRuleChangesCloseOpenConnections: a tunnel, a transparent TLS
// connection and a streamed proxy response opened under rules that allowed
// them are closed when a rule change or a grant's end refuses their host,
// and the closing is recorded; connections still allowed stay open.
func TestRuleChangesCloseOpenConnections(t *testing.T) {
	e := newEnv(t)
	base := egress.Policy{Allow: []string{"up.test", "other.test"}}
	set := func(p egress.Policy) {
		t.Helper()
		n, err := egress.NormalizePolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		if !e.srv.SetPolicy("egtest1", n) {
			t.Fatal("not attached")
		}
	}
	wantRecorded := func(t *testing.T, host, rule string) {
		t.Helper()
		for _, r := range e.allRefusals() {
			if r.Via == "rules-changed" && r.Host == host && r.Rule == rule {
				return
			}
		}
		t.Fatalf("no rules-changed refusal of %s by %s in %+v", host, rule, e.allRefusals())
	}
	// slow streams /slow from host through the explicit proxy, on a
	// CONNECT tunnel when tunnel is set, else as a plain proxy request.
	slow := func(t *testing.T, host string, tunnel bool) (net.Conn, *bufio.Reader) {
		t.Helper()
		var c net.Conn
		var br *bufio.Reader
		if tunnel {
			c, br = e.tunnel(t, host+":443")
			tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: host, InsecureSkipVerify: true})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			c, br = tc, bufio.NewReader(tc)
			fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		} else {
			var err error
			c, err = dialFrom(t, e.link.NetNS)(t.Context(), "tcp", fmt.Sprintf("%s:%d", e.link.Gateway, egress.ProxyPort))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			br = bufio.NewReader(c)
			fmt.Fprintf(c, "GET http://%s/slow HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /slow: %v %v", resp, err)
		}
		// Read the chunked body line by line from here.
		body := bufio.NewReader(resp.Body)
		staysOpen(t, c, body)
		return c, body
	}

	for _, tunnel := range []bool{true, false} {
		name := map[bool]string{true: "tunnel", false: "proxy request"}[tunnel]
		t.Run("a deny rule closes a "+name, func(t *testing.T) {
			set(base)
			c, r := slow(t, "up.test", tunnel)
			keep, keepR := slow(t, "other.test", tunnel)
			set(egress.Policy{Allow: []string{"up.test", "other.test"}, Deny: []string{"up.test"}})
			endsSoon(t, c, r)
			wantRecorded(t, "up.test", "deny:up.test")
			staysOpen(t, keep, keepR)
		})
	}

	t.Run("a grant's end closes a transparent connection", func(t *testing.T) {
		set(egress.Policy{Allow: []string{"up.test"}})
		revoke, ok := e.srv.Grant("egtest1", []string{"other.test"})
		if !ok {
			t.Fatal("grant")
		}
		defer revoke()
		// Straight to the upstream's address: the firewall redirects 443.
		raw, err := dialFrom(t, e.link.NetNS)(t.Context(), "tcp", net.JoinHostPort(e.up.addr, "443"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		tc := tls.Client(raw, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true})
		fmt.Fprintf(tc, "GET /slow HTTP/1.1\r\nHost: other.test\r\n\r\n")
		br := bufio.NewReader(tc)
		_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		body := bufio.NewReader(resp.Body)
		staysOpen(t, raw, body)
		revoke()
		endsSoon(t, raw, body)
		wantRecorded(t, "other.test", "default-deny")
	})

	t.Run("a kept-alive proxy connection between requests is not refused", func(t *testing.T) {
		set(base)
		c := e.proxyClient(t)
		if code, body, _, err := get(t, c, "http://up.test/", ""); err != nil || code != 200 {
			t.Fatalf("%d %q %v", code, body, err)
		}
		before := len(e.allRefusals())
		set(egress.Policy{Allow: []string{"up.test"}, Deny: []string{"other.test"}})
		for _, r := range e.allRefusals()[before:] {
			if strings.Contains(r.Host, "up.test") {
				t.Fatalf("idle connection refused: %+v", r)
			}
		}
	})
}
