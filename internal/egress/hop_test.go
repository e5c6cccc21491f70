package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/egress"
)

// TestForwardStripsHopByHopFields: fields the Connection header names are
// for one hop; the proxy passes them on neither way.
func TestForwardStripsHopByHopFields(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct{ name, addr, target string }{
		{"proxy", fmt.Sprintf("%s:%d", e.link.Gateway, egress.ProxyPort), "http://up.test/hop"},
		{"transparent", net.JoinHostPort(e.up.addr, "80"), "/hop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := dialFrom(t, e.link.NetNS)(ctx, "tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: up.test\r\nConnection: X-Hop-Req\r\nX-Hop-Req: secret-for-the-proxy\r\nX-End-To-End: yes\r\n\r\n", tt.target)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != `hop-req="" e2e-req="yes"` {
				t.Fatalf("upstream saw %s", b)
			}
			if resp.Header.Get("X-Hop-Resp") != "" || resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("X-End-To-End") != "kept" {
				t.Fatalf("response header %v", resp.Header)
			}
		})
	}
}
