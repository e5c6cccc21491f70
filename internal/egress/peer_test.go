package egress_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/paddock-dev/paddock/internal/egress"
)

// TestEgressServesOnlyItsSandbox: the host can route to a sandbox's
// gateway address (it is one of its own), as can anything else on the
// host; none of it may use the sandbox's proxy, transparent listener or
// resolver. The same probe from the sandbox's namespace is answered, so a
// silent listener would fail the test.
func TestEgressServesOnlyItsSandbox(t *testing.T) {
	e := newEnv(t)
	gw := e.link.Gateway.String()
	hostDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	sandboxDial := dialFrom(t, e.link.NetNS)

	// tcpProbe sends req and returns what comes back before the
	// connection ends or two seconds pass.
	tcpProbe := func(dial func(context.Context, string, string) (net.Conn, error), port int, req string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := dial(ctx, "tcp", net.JoinHostPort(gw, fmt.Sprint(port)))
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			return "", err
		}
		b, err := io.ReadAll(io.LimitReader(c, 64))
		return string(b), err
	}
	dnsProbe := func(dial func(context.Context, string, string) (net.Conn, error), network string) (*dns.Msg, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := dial(ctx, network, net.JoinHostPort(gw, "53"))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		co := &dns.Conn{Conn: c}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		m := new(dns.Msg)
		m.SetQuestion("up.test.", dns.TypeA)
		if err := co.WriteMsg(m); err != nil {
			return nil, err
		}
		return co.ReadMsg()
	}
	httpReq := "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\nConnection: close\r\n\r\n"
	transReq := "GET / HTTP/1.1\r\nHost: up.test\r\nConnection: close\r\n\r\n"

	before := len(e.allRefusals())
	for _, tt := range []struct {
		name  string
		probe func(dial func(context.Context, string, string) (net.Conn, error)) (string, error)
	}{
		{"proxy", func(d func(context.Context, string, string) (net.Conn, error)) (string, error) {
			return tcpProbe(d, egress.ProxyPort, httpReq)
		}},
		{"transparent", func(d func(context.Context, string, string) (net.Conn, error)) (string, error) {
			return tcpProbe(d, egress.TransparentPort, transReq)
		}},
		{"dns-udp", func(d func(context.Context, string, string) (net.Conn, error)) (string, error) {
			m, err := dnsProbe(d, "udp")
			if err != nil {
				return "", err
			}
			return m.String(), nil
		}},
		{"dns-tcp", func(d func(context.Context, string, string) (net.Conn, error)) (string, error) {
			m, err := dnsProbe(d, "tcp")
			if err != nil {
				return "", err
			}
			return m.String(), nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.probe(sandboxDial)
			if got == "" {
				t.Fatalf("the sandbox got no answer: %v", err)
			}
			// Closed or timed out, never answered.
			if got, err = tt.probe(hostDial); got != "" {
				t.Fatalf("a client on the host was answered: %q (%v)", got, err)
			}
		})
	}
	// The sandbox's own transparent probe was refused (port 3129) and
	// recorded; the host's probes left nothing in its ledger.
	for _, r := range e.allRefusals()[before:] {
		if r.Via != "transparent" || r.Port != egress.TransparentPort {
			t.Errorf("refusal recorded for a probe that was not the sandbox's: %+v", r)
		}
	}
}
