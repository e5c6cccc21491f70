package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent"
	"github.com/paddock-dev/paddock/internal/agent/client"
)

// env is one agent served in-process on a socket in a temp dir, with its
// own passwd and group files whose users live under root.
type env struct {
	root   string // temp root holding homes and scratch space
	home   string // the default user's home
	socket string
	uid    int
	c      *client.Client
}

func isRoot() bool { return os.Geteuid() == 0 }

func newEnv(t *testing.T, adjust ...func(*agent.Options)) *env {
	t.Helper()
	root := t.TempDir()
	// Unix socket paths are short (108 bytes): keep the socket out of the
	// long per-test directory.
	sockDir, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	uid := os.Getuid()
	if isRoot() {
		uid = 1000
	}
	home := filepath.Join(root, "home", "user")
	etc := filepath.Join(root, "etc")
	for _, d := range []string{home, etc, filepath.Join(root, "roothome")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if isRoot() {
		// The test root is 0700 by default; the unprivileged user must be
		// able to reach its home.
		for _, d := range []string{filepath.Dir(root), root, filepath.Join(root, "home")} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(home, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:%s:/bin/sh\nuser:x:%d:%d::%s:/bin/sh\n", filepath.Join(root, "roothome"), uid, uid, home)
	group := fmt.Sprintf("root:x:0:\nuser:x:%d:\nextra:x:4242:user\n", uid)
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "group"), []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "agent.sock")
	ln, err := agent.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	tw := testWriter{t: t, mu: new(sync.Mutex), done: new(bool)}
	log := slog.New(slog.NewTextHandler(tw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := agent.Options{
		Logger:        log,
		EtcDir:        etc,
		Env:           []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SANDBOX_WIDE=yes"},
		ShutdownGrace: time.Second,
		MaxTarBytes:   64 << 20,
		MaxTarEntries: 1000,
	}
	for _, f := range adjust {
		f(&opts)
	}
	a := agent.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	c := client.New(sock)
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		tw.mu.Lock()
		*tw.done = true
		tw.mu.Unlock()
	})
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("agent not ready: %v", err)
	}
	return &env{root: root, home: home, socket: sock, uid: uid, c: c}
}

// testWriter sends the agent's log to the test's log, so a failure shows
// what the agent did.
type testWriter struct {
	t    *testing.T
	mu   *sync.Mutex
	done *bool
}

func (w testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !*w.done {
		w.t.Log(string(p))
	}
	return len(p), nil
}

// run executes argv and collects its output.
func (e *env) run(t *testing.T, ctx context.Context, o client.ExecOptions) (client.ExecResult, string, string, error) {
	t.Helper()
	var stdout, stderr []byte
	res, err := e.c.Exec(ctx, o, nil, func(stream int, p []byte) error {
		if stream == client.Stdout {
			stdout = append(stdout, p...)
		} else {
			stderr = append(stderr, p...)
		}
		return nil
	})
	return res, string(stdout), string(stderr), err
}
