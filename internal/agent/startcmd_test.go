package agent

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/wire"
)

// startAgent is an unclaimed pool agent given start as its EnvStart.
func startAgent(t *testing.T, start string) (*Agent, http.Handler) {
	t.Helper()
	etc := t.TempDir()
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0::"+t.TempDir()+":/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "group"), []byte("root:x:0:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(wire.EnvStart, start)
	a := New(Options{EtcDir: etc, DefaultUser: "root", PoolToken: strings.Repeat("p", 64)})
	ctx, cancel := context.WithCancel(context.Background())
	a.startFromEnv(ctx)
	t.Cleanup(func() {
		cancel()
		if b, err := a.bg.get(wire.StartProcessID); err == nil {
			_ = a.killBackground(context.Background(), b, syscall.SIGKILL, 0)
		}
	})
	return a, a.Handler()
}

// waitStarted polls wire.StartedPath without a token until it answers
// want.
func waitStarted(t *testing.T, h http.Handler, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := gateCall(t, h, "GET", wire.StartedPath, "", "")
		if c == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answers %d, want %d", wire.StartedPath, c, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStartFromEnv: an agent given a start command runs it as the
// background process "start" and answers the readiness probe 503 until
// its check passes, then 200, without a token; nothing else opens
// without one.
func TestStartFromEnv(t *testing.T) {
	a, h := startAgent(t, `{"cmd":["sh","-c","echo booting; sleep 0.5; echo listening now; exec sleep 60"],"user":"root","ready_log":"listening now","ready_timeout_ms":10000}`)
	if c := gateCall(t, h, "GET", wire.StartedPath, "", ""); c != http.StatusServiceUnavailable {
		t.Fatalf("before the check passed: %d, want 503", c)
	}
	waitStarted(t, h, http.StatusOK)
	b, err := a.bg.get(wire.StartProcessID)
	if err != nil {
		t.Fatal(err)
	}
	if b.isDone() || !strings.Contains(string(b.stdout.Tail(4096)), "listening now") {
		t.Fatalf("the start process: done %v, output %q", b.isDone(), string(b.stdout.Tail(4096)))
	}
	if c := gateCall(t, h, "GET", "/health", "", ""); c != http.StatusUnauthorized {
		t.Fatalf("health without a token: %d, want 401", c)
	}
	if c := gateCall(t, h, "POST", wire.StartedPath, "", ""); c != http.StatusUnauthorized {
		t.Fatalf("POST to the probe's path without a token: %d, want 401", c)
	}
}

// A command that ends before its check, a check that times out and a
// spec that does not parse all leave the pod unready (500).
func TestStartFromEnvFails(t *testing.T) {
	for name, spec := range map[string]string{
		"exits":     `{"cmd":["sh","-c","exit 3"],"user":"root","ready_port":1}`,
		"times out": `{"cmd":["sleep","60"],"user":"root","ready_log":"never","ready_timeout_ms":300}`,
		"not json":  `{"cmd":`,
		"no cmd":    `{"cmd":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, h := startAgent(t, spec)
			waitStarted(t, h, http.StatusInternalServerError)
		})
	}
}

// Without EnvStart the probe's answer is ready.
func TestStartedWithoutStartCommand(t *testing.T) {
	_, h := startAgent(t, "")
	if c := gateCall(t, h, "GET", wire.StartedPath, "", ""); c != http.StatusOK {
		t.Fatalf("no start command: %d, want 200", c)
	}
}
