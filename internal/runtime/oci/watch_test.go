package oci

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseExitRecord(t *testing.T) {
	for in, want := range map[string]string{
		"signal 15\n": "signal 15", "status 0": "status 0", "status 255": "status 255",
		"signal 65": "", "status 256": "", "signal -1": "", "boom": "", "signal 9 extra": "",
		"": "", "signal  9": "", "kill 9": "",
	} {
		if got := parseExitRecord([]byte(in)); got != want {
			t.Errorf("parseExitRecord(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseOOMKills(t *testing.T) {
	v1 := "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	v2 := "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"
	for in, want := range map[string]int64{v1: 3, v2: 2} {
		if n, ok := parseOOMKills([]byte(in)); !ok || n != want {
			t.Errorf("parseOOMKills(%q) = %d %v, want %d", in, n, ok, want)
		}
	}
	if _, ok := parseOOMKills([]byte("oom_kill_disable 0\n")); ok {
		t.Error("no oom_kill line must be unknown")
	}
}

func TestWaitPidfdCtx(t *testing.T) {
	cmd := exec.Command("sleep", "0.2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	go func() { _ = cmd.Wait() }()
	start := time.Now()
	if err := waitPidfdCtx(context.Background(), fd); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("exit seen after %s", d)
	}

	cmd = exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	fd, err = unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := waitPidfdCtx(ctx, fd); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a live process with an ending ctx = %v", err)
	}
}
