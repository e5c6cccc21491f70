package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// tcpAgent serves an agent on loopback TCP with token and returns its
// address.
func tcpAgent(t *testing.T, token string) string {
	return tcpAgentWith(t, token, "")
}

// tcpAgentWith is tcpAgent for a pool's agent too: poolToken set and
// token empty starts it unclaimed.
func tcpAgentWith(t *testing.T, token, poolToken string) string {
	t.Helper()
	ln, err := agent.ListenTCP("127.0.0.1:0", token+poolToken)
	if err != nil {
		t.Fatal(err)
	}
	a := agent.New(agent.Options{
		Env:           []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		DefaultUser:   "root",
		Token:         token,
		PoolToken:     poolToken,
		ShutdownGrace: time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestTCPAgentToken: an agent on a network answers only requests that
// carry its token, on every path the daemon uses (RPCs, plain HTTP, the
// relayed envd transport, port tunnels).
func TestTCPAgentToken(t *testing.T) {
	if !isRoot() {
		t.Skip("the agent's default user is root; needs root")
	}
	token := strings.Repeat("ab12", 16)
	addr := tcpAgent(t, token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := client.NewTCP(addr, token)
	t.Cleanup(func() { c.Close() })
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("ready with the token: %v", err)
	}
	var out []byte
	res, err := c.Exec(ctx, client.ExecOptions{Cmd: []string{"echo", "over tcp"}}, nil, func(_ int, p []byte) error {
		out = append(out, p...)
		return nil
	})
	if err != nil || res.ExitCode != 0 || string(out) != "over tcp\n" {
		t.Fatalf("exec with the token: %+v %q %v", res, out, err)
	}
	port := echoServer(t)
	conn, err := c.DialPort(ctx, port)
	if err != nil {
		t.Fatalf("port tunnel with the token: %v", err)
	}
	_, _ = io.WriteString(conn, "ping")
	_ = conn.(interface{ CloseWrite() error }).CloseWrite()
	if got, err := io.ReadAll(conn); err != nil || string(got) != "ping" {
		t.Fatalf("tunnel echo: %q %v", got, err)
	}
	conn.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
	if resp, err := c.Transport().RoundTrip(req); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("relayed request with the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	for name, bad := range map[string]string{"wrong token": strings.Repeat("cd34", 16), "no token": ""} {
		t.Run(name, func(t *testing.T) {
			wc := client.NewTCP(addr, bad)
			t.Cleanup(func() { wc.Close() })
			short, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := wc.WaitReady(short); err == nil {
				t.Fatal("ready without the right token")
			}
			if _, err := wc.Exec(ctx, client.ExecOptions{Cmd: []string{"true"}}, nil, func(int, []byte) error { return nil }); err == nil {
				t.Fatal("exec without the right token")
			}
			if _, err := wc.DialPort(ctx, port); err == nil {
				t.Fatal("port tunnel without the right token")
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
			resp, err := wc.Transport().RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("health without the right token: %d", resp.StatusCode)
			}
		})
	}
}

// TestListenTCPNeedsToken: the agent never listens on a network without a
// token worth the name.
func TestListenTCPNeedsToken(t *testing.T) {
	for _, tok := range []string{"", "short", strings.Repeat("x", 257)} {
		ln, err := agent.ListenTCP("127.0.0.1:0", tok)
		if err == nil {
			ln.Close()
			t.Fatalf("ListenTCP with a %d-character token listened", len(tok))
		}
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("ListenTCP: %v", err)
		}
	}
}
