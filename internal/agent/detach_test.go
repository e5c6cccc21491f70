package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/client"
)

// TestDetachAndAttach: on SignalDetach the agent (a standalone process,
// as in a sandbox) closes its listener and every open connection and
// removes its socket, while its processes run on; it answers nothing until
// SignalAttach, then serves again at the same path.
func TestDetachAndAttach(t *testing.T) {
	sock, cmd, _ := launchStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(sock)
	defer c.Close()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	health := func() error {
		conn, err := net.DialTimeout("unix", sock, time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return errors.New(resp.Status)
		}
		return nil
	}
	// An idle keep-alive connection, as the daemon's client keeps.
	idle, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /health HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// An attach asked for while attached (a restarted daemon makes sure
	// of the agent that way) must not undo the next detach.
	if err := cmd.Process.Signal(SignalAttach); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(SignalDetach); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Lstat(sock); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket is still there 10 s after the detach signal")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the idle connection is still open after the detach")
	}
	if err := health(); err == nil {
		t.Fatal("the agent answered while detached")
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Lstat(sock); err == nil {
		t.Fatal("the agent listens again without being asked")
	}

	if err := cmd.Process.Signal(SignalAttach); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("no answer after the attach: %v", err)
	}
	if err := health(); err != nil {
		t.Fatalf("after the attach: %v", err)
	}
}

// TestConnSetClosesHijacked: connections taken over from the HTTP server
// (terminals, port forwards) are closed by a detach too.
func TestConnSetClosesHijacked(t *testing.T) {
	s := newConnSet()
	a, b := net.Pipe()
	defer b.Close()
	s.track(a, http.StateNew)
	s.track(a, http.StateActive)
	s.track(a, http.StateHijacked)
	s.closeAll()
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read from the peer of a hijacked connection after closeAll: %v", err)
	}
}
