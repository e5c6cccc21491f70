package image

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The image's wget takes -T whatever busybox it was built from: Debian's
// busybox-static has no -T in wget and crashes with SIGSEGV on it.
func TestBusyboxWgetTimeout(t *testing.T) {
	needBusybox(t)
	s := newTestStore(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := s.Ensure(ctx, NameBusybox, nil)
	if err != nil {
		t.Fatal(err)
	}
	rootfs := img.Layers[0]
	for _, args := range [][]string{
		{"wget", "-T", "3", "-O-", "http://127.0.0.1:1/"},
		{"wget", "-q", "-T3", "-O-", "http://127.0.0.1:1/"},
		{"wget", "--timeout=3", "-O-", "http://127.0.0.1:1/"},
		{"wget", "-O-", "http://127.0.0.1:1/"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Path = "/usr/bin/wget"
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "can't connect") {
			t.Errorf("%v: %v (want exit 1, connection refused)\n%s", args, err, out)
		}
	}

	// A server that never answers: -T ends the wait.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command("wget", "-T", "1", "-O-", "http://"+ln.Addr().String()+"/")
	cmd.Path = "/usr/bin/wget"
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs}
	start := time.Now()
	done := make(chan error, 1)
	must(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || time.Since(start) > 20*time.Second {
			t.Errorf("wget -T 1 against a silent server: %v after %s", err, time.Since(start))
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Error("wget -T 1 still waits for a silent server after 30 s")
	}
}
