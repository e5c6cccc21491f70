package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFUSELoopback: the workspace-fuse figures' server (this test binary
// started again as it) serves the source directory at the mount, a
// command started from this process reads and writes through it, and
// stopping it leaves no mount.
func TestFUSELoopback(t *testing.T) {
	needRoot(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		_ = exec.Command("modprobe", "fuse").Run()
	}
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := startFUSELoopback(context.Background(), src, mnt)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			f.stop()
		}
	})
	if !isFUSEMount(mnt) {
		t.Fatalf("no FUSE mount at %s after the server said it serves", mnt)
	}
	cmd := exec.Command("/bin/sh", "-c", "wc -l < a.txt && echo three >> a.txt")
	cmd.Dir = mnt
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "2\n" {
		t.Fatalf("command through the mount: %v: %q", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("a write through the mount left the source %q", b)
	}
	f.stop()
	stopped = true
	if isFUSEMount(mnt) {
		t.Fatalf("%s is still a FUSE mount after the server stopped", mnt)
	}
	if f.cmd.ProcessState == nil || !f.cmd.ProcessState.Success() {
		t.Fatalf("the server ended %v", f.cmd.ProcessState)
	}
}
