package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	agentclient "github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// tagServer answers each line it reads with the line behind its tag, and
// once its client stops writing, with "bye from TAG".
func tagServer(t testing.TB, tag string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "%s:%s\n", tag, sc.Text())
				}
				fmt.Fprintf(c, "bye from %s\n", tag)
			}()
		}
	}()
	return ln.Addr().String()
}

// serveTCP serves a over TCP on loopback with token, as in a pod.
func serveTCP(t *testing.T, a *Agent, token string) string {
	t.Helper()
	ln, err := ListenTCP("127.0.0.1:0", token)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

func relayLine(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read through the relay: %v", err)
	}
	return strings.TrimSpace(got)
}

func TestEgressRelayFollowsItsUpstream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := tagServer(t, "a"), tagServer(t, "b")
	relay, err := startEgressRelay(ctx, nil, "127.0.0.1:0", a)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.Repeat("t", 64)
	ag := New(Options{Token: token})
	ag.relay.Store(relay)
	addr := serveTCP(t, ag, token)
	cl := agentclient.NewTCP(addr, token)

	first, err := net.Dial("tcp", relay.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	fr := bufio.NewReader(first)
	if got := relayLine(t, first, fr, "one"); got != "a:one" {
		t.Fatalf("through the relay: %q, want a:one", got)
	}

	// Bad addresses are refused and change nothing.
	for _, bad := range []string{"", "b", "0.0.0.0:3128", "10.0.0.1:0", "[::]:80", "host.example:80"} {
		err := cl.SetEgressUpstream(ctx, bad)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("upstream %q: %v, want invalid argument", bad, err)
		}
	}
	if got := relay.Upstream().String(); got != a {
		t.Fatalf("upstream after refused changes: %s, want %s", got, a)
	}
	// Without the agent's token, nothing changes.
	if err := agentclient.NewTCP(addr, strings.Repeat("x", 64)).SetEgressUpstream(ctx, b); err == nil {
		t.Fatal("a change with a wrong token was taken")
	}

	if err := cl.SetEgressUpstream(ctx, b); err != nil {
		t.Fatal(err)
	}
	second, err := net.Dial("tcp", relay.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	sr := bufio.NewReader(second)
	if got := relayLine(t, second, sr, "two"); got != "b:two" {
		t.Fatalf("a new connection after the change: %q, want b:two", got)
	}
	// The open connection stays with the proxy it had.
	if got := relayLine(t, first, fr, "three"); got != "a:three" {
		t.Fatalf("the open connection after the change: %q, want a:three", got)
	}
	// A client that stops writing still reads the proxy's last words.
	if err := second.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(sr)
	if err != nil || strings.TrimSpace(string(rest)) != "bye from b" {
		t.Fatalf("after closing its write side: %q, %v", rest, err)
	}

	// The relay ends with its context.
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", relay.ln.Addr().String())
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the relay still listens after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEgressRelayProxyAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	away := ln.Addr().String()
	ln.Close()
	relay, err := startEgressRelay(t.Context(), nil, "127.0.0.1:0", away)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", relay.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a relay whose proxy is away", n)
	}
}

func TestNoEgressRelay(t *testing.T) {
	token := strings.Repeat("t", 64)
	addr := serveTCP(t, New(Options{Token: token}), token)
	err := agentclient.NewTCP(addr, token).SetEgressUpstream(t.Context(), "10.0.0.1:3128")
	if !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("an agent without a relay: %v, want conflict", err)
	}
	if _, err := startEgressRelay(t.Context(), nil, "127.0.0.1:0", "not an address"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a relay to no address: %v, want invalid argument", err)
	}
}

// BenchmarkEgressRelay: a new connection and one line's round trip
// through the relay, against the same straight to the server (sub-benchmark
// "direct"): what the relay adds to each proxied request.
func BenchmarkEgressRelay(b *testing.B) {
	server := tagServer(b, "b")
	relay, err := startEgressRelay(b.Context(), nil, "127.0.0.1:0", server)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, addr string }{{"direct", server}, {"relay", relay.ln.Addr().String()}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				c, err := net.Dial("tcp", tc.addr)
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintln(c, "ping")
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
