package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// TestMountWaitsForLazyUnmount: a disk whose unmount found it busy is
// detached lazily and lives on while a file in it is open. A second
// mount of the same image waits for that one to go (two ext4 instances
// on one file corrupt it), gives up with unavailable if it stays, and
// then mounts the image with what the first mount wrote.
func TestMountWaitsForLazyUnmount(t *testing.T) {
	needRoot(t)
	requireMkfs(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	if err := createDisk(context.Background(), img, testDiskSize); err != nil {
		t.Fatal(err)
	}
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	for _, d := range []string{first, second} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := mountDisk(img, first, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmount(first); _ = unmount(second) })
	held, err := os.Create(filepath.Join(first, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.WriteString("written through the first mount\n"); err != nil {
		t.Fatal(err)
	}
	if err := unmount(first); err != nil { // busy: detached lazily
		t.Fatal(err)
	}
	if dev, err := loopBacking(img); err != nil || dev == "" {
		t.Fatalf("no loop device backs the lazily unmounted image (%q, %v): the test shows nothing", dev, err)
	}
	if err := waitDiskReleased(img, 300*time.Millisecond, nil); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("wait while the old mount lives: %v; want unavailable", err)
	}
	mounted := make(chan error, 1)
	go func() { mounted <- mountDisk(img, second, nil) }()
	select {
	case err := <-mounted:
		t.Fatalf("mounted a second time while the first mount lives (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	held.Close()
	select {
	case err := <-mounted:
		if err != nil {
			t.Fatalf("mount after the first went: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the second mount still waits after the first mount's last file closed")
	}
	b, err := os.ReadFile(filepath.Join(second, "held"))
	if err != nil || string(b) != "written through the first mount\n" {
		t.Errorf("second mount reads %q, %v", b, err)
	}
}

// TestWaitKillsTheSandboxsOwnHolder: a process whose command line names
// the sandbox's directory (as a gVisor gofer or sentry of that sandbox
// does) and that keeps a file of its lazily unmounted disk open is killed
// by the wait, which then sees the disk released; a holder that is not
// the sandbox's is left alone and named in the error.
func TestWaitKillsTheSandboxsOwnHolder(t *testing.T) {
	needRoot(t)
	requireMkfs(t)
	root := t.TempDir()
	sandboxDir := filepath.Join(root, "sbx")
	if err := os.Mkdir(sandboxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(sandboxDir, "disk.img")
	if err := createDisk(context.Background(), img, testDiskSize); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(sandboxDir, "scratch")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mountDisk(img, mnt, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmount(mnt) })
	file := filepath.Join(mnt, "held")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// hold starts a stopped shell that keeps file open; its command line
	// names the file's path, and so the sandbox's directory.
	hold := func(name string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sh", "-c", `exec 3<"$1"; kill -STOP $$`, name, file)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	// Another's: a holder whose command line does not name the sandbox's
	// directory (the file is reached through a symlink outside it).
	outside := filepath.Join(root, "link")
	if err := os.Symlink(file, outside); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sh", "-c", `exec 3<"$1"; kill -STOP $$`, "other", outside)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	time.Sleep(200 * time.Millisecond) // both have opened the file
	if err := unmount(mnt); err != nil {
		t.Fatal(err)
	}
	err := waitDiskReleased(img, 2500*time.Millisecond, nil)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", other.Process.Pid)) {
		t.Fatalf("wait while another's process holds the disk: %v; want unavailable naming pid %d", err, other.Process.Pid)
	}
	_ = other.Process.Kill()
	_ = other.Wait()

	own := hold("own")
	done := make(chan error, 1)
	go func() { done <- own.Wait() }()
	if err := waitDiskReleased(img, 15*time.Second, nil); err != nil {
		t.Fatalf("wait with the sandbox's own process holding the disk: %v", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the sandbox's own holder is still alive after the wait")
	}
}
