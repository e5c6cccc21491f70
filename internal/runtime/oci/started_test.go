package oci

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

func TestStartedPidfds(t *testing.T) {
	var s startedPidfds
	if _, ok := s.dup("a"); ok {
		t.Fatal("dup on an empty set found a pidfd")
	}
	if sent, err := s.signal("a", syscall.SIGUSR2); sent || err != nil {
		t.Fatalf("signal with none kept = %v, %v; want nothing sent", sent, err)
	}

	// Kept for a live process: copies for the watchers, signals through it.
	s.open("a", os.Getpid())
	t.Cleanup(func() { s.drop("a") })
	c1, ok := s.dup("a")
	if !ok {
		t.Fatal("no pidfd kept for a live process")
	}
	c2, ok := s.dup("a")
	if !ok || c1 == c2 {
		t.Fatalf("second copy: %d %v (first %d)", c2, ok, c1)
	}
	unix.Close(c1)
	unix.Close(c2)
	got := make(chan os.Signal, 1)
	signal.Notify(got, syscall.SIGUSR2)
	defer signal.Stop(got)
	if sent, err := s.signal("a", syscall.SIGUSR2); !sent || err != nil {
		t.Fatalf("signal = %v, %v", sent, err)
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the signal did not arrive")
	}

	// A later run's pidfd replaces the earlier one, which is closed; drop
	// closes what is kept.
	s.open("b", os.Getpid())
	s.mu.Lock()
	old := s.fds["b"]
	s.mu.Unlock()
	s.open("b", os.Getpid())
	if fdOpen(old) {
		t.Fatal("the earlier run's pidfd is still open")
	}
	s.mu.Lock()
	cur := s.fds["b"]
	s.mu.Unlock()
	s.drop("b")
	if _, ok := s.dup("b"); ok || fdOpen(cur) {
		t.Fatal("drop left the pidfd kept or open")
	}

	// A process that ended: signals say so; one reaped already leaves
	// nothing kept, and drops what was.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.open("c", cmd.Process.Pid)
	t.Cleanup(func() { s.drop("c") })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if sent, err := s.signal("c", syscall.SIGUSR2); !sent || !errors.Is(err, errNoContainer) {
		t.Fatalf("signal to an ended process = %v, %v; want errNoContainer", sent, err)
	}
	s.open("c", cmd.Process.Pid)
	if _, ok := s.dup("c"); ok {
		t.Fatal("a pidfd kept for a process that was reaped")
	}
}
