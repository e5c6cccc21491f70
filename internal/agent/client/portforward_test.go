package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// echoServer accepts on a loopback port and echoes until EOF, then closes
// its side: the half-close must travel through the tunnel both ways.
func echoServer(t *testing.T) int {
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
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestDialPort(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := echoServer(t)

	conn, err := e.c.DialPort(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	payload := strings.Repeat("paddock-", 64<<10) // larger than any buffer on the way
	go func() {
		_, _ = io.WriteString(conn, payload)
		_ = conn.(interface{ CloseWrite() error }).CloseWrite()
	}()
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != payload {
		t.Fatalf("echo through the tunnel: %d bytes, %v; want %d bytes", len(got), err, len(payload))
	}

	// Several tunnels at once are independent.
	for i := range 8 {
		c, err := e.c.DialPort(ctx, port)
		if err != nil {
			t.Fatalf("tunnel %d: %v", i, err)
		}
		msg := []byte{byte('a' + i)}
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != msg[0] {
			t.Fatalf("tunnel %d echoed %q, %v", i, b, err)
		}
		c.Close()
	}
}

func TestDialPortErrors(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	cases := []struct {
		name    string
		port    int
		want    error
		message string
	}{
		{"nothing listens", closed, errdefs.ErrUnavailable, "nothing is listening"},
		{"zero", 0, errdefs.ErrInvalidArgument, "out of range"},
		{"negative", -1, errdefs.ErrInvalidArgument, "out of range"},
		{"too big", 65536, errdefs.ErrInvalidArgument, "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := e.c.DialPort(ctx, tc.port)
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v; want %v saying %q", err, tc.want, tc.message)
			}
		})
	}

	canceled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if _, err := e.c.DialPort(canceled, closed); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled dial: %v", err)
	}
}
