package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/egress"
)

// TestConnectionLimit: past MaxConns open connections a sandbox's proxy
// answers 503 saying why, its transparent listener closes; a closed
// connection frees its slot.
func TestConnectionLimit(t *testing.T) {
	e := newEnvWith(t, "", func(o *egress.Options) { o.MaxConns = 3 })
	dial := func(port int) net.Conn {
		t.Helper()
		c, err := dialFrom(t, e.link.NetNS)(context.Background(), "tcp", fmt.Sprintf("%s:%d", e.link.Gateway, port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	get := func(c net.Conn) (*http.Response, string, error) {
		fmt.Fprint(c, "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return nil, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), nil
	}
	var open []net.Conn
	for range 2 {
		c := dial(egress.ProxyPort)
		if resp, body, err := get(c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("within the limit: %v %q %v", resp, body, err)
		}
		open = append(open, c)
	}
	// A tunnel counts too: the third.
	tun := dial(egress.ProxyPort)
	fmt.Fprint(tun, "CONNECT up.test:443 HTTP/1.1\r\nHost: up.test:443\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(tun), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	resp, body, err := get(dial(egress.ProxyPort))
	if err != nil || resp.StatusCode != 503 || !strings.Contains(body, "already has 3 open proxy connections") {
		t.Fatalf("past the limit: %v %q %v", resp, body, err)
	}
	// The transparent listener shares the limit; it closes unanswered.
	c := dial(egress.TransparentPort)
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("transparent past the limit answered %q", b)
	}
	if r := e.lastRefusal(); r.Rule != "connection-limit" {
		t.Fatalf("recorded %+v", r)
	}
	// Closing one frees a slot.
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, body, err := get(dial(egress.ProxyPort))
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing one: %v %q %v", resp, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
