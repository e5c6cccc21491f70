package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	if err := mountDisk(img, first); err != nil {
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
	if err := waitDiskReleased(img, 300*time.Millisecond); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("wait while the old mount lives: %v; want unavailable", err)
	}
	mounted := make(chan error, 1)
	go func() { mounted <- mountDisk(img, second) }()
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
