package oci

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const testDiskSize = 32 << 20

func requireMkfs(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed (apt-get install e2fsprogs)")
	}
}

// waitPool waits until the pool holds n images of size.
func waitPool(t *testing.T, p *diskPool, size int64, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		got := len(p.ready[size])
		p.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pool never held %d images of %d bytes", n, size)
}

func newTestPool(t *testing.T, dir string, perSize int) *diskPool {
	t.Helper()
	p, err := newDiskPool(dir, perSize, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p
}

func TestParseDiskName(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
		ok   bool
	}{
		{"33554432.0123456789abcdef.img", 33554432, true},
		{".tmp-0123456789abcdef", 0, false},
		{"33554432.0123456789abcdef.img.tmp", 0, false},
		{"33554432.0123456789abcdeg.img", 0, false},  // not hex
		{"33554432.0123.img", 0, false},              // short tag
		{"033554432.0123456789abcdef.img", 0, false}, // not canonical
		{"1024.0123456789abcdef.img", 0, false},      // below the minimum disk
		{"-33554432.0123456789abcdef.img", 0, false},
		{"99999999999999999999.0123456789abcdef.img", 0, false},
		{"disk.img", 0, false},
	} {
		size, ok := parseDiskName(tc.name)
		if ok != tc.ok || size != tc.size {
			t.Errorf("parseDiskName(%q) = %d, %v; want %d, %v", tc.name, size, ok, tc.size, tc.ok)
		}
	}
}

func FuzzParseDiskName(f *testing.F) {
	f.Add("33554432.0123456789abcdef.img")
	f.Add(".tmp-x")
	f.Fuzz(func(t *testing.T, name string) {
		size, ok := parseDiskName(name)
		if !ok {
			return
		}
		if size < minDiskBytes || size > maxDiskBytes || !strings.HasPrefix(name, fmt.Sprint(size)+".") {
			t.Fatalf("accepted %q as size %d", name, size)
		}
	})
}

// TestDiskPoolReconcile: what a killed daemon left is sorted at the next
// start: complete images are reused, half-made ones and strangers removed.
func TestDiskPoolReconcile(t *testing.T) {
	requireMkfs(t)
	dir := t.TempDir()
	first := newTestPool(t, dir, 2)
	if first.take(filepath.Join(t.TempDir(), "d.img"), testDiskSize) {
		t.Fatal("an empty pool handed out an image")
	}
	waitPool(t, first, testDiskSize, 2)
	first.close()
	kept, _ := filepath.Glob(filepath.Join(dir, "*.img"))
	if len(kept) != 2 {
		t.Fatalf("ready images: %v", kept)
	}
	// What a kill -9 mid-format leaves, and what does not belong.
	leftovers := []string{".tmp-0123456789abcdef", "junk", "33554432.0123456789abcdef.img"} // the last: wrong length
	for _, n := range leftovers {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	second := newTestPool(t, dir, 2)
	for _, n := range leftovers {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			t.Errorf("leftover %s survived reconcile", n)
		}
	}
	dst := filepath.Join(t.TempDir(), "d.img")
	if !second.take(dst, testDiskSize) {
		t.Fatal("a complete image from the previous run was not reused")
	}
	if _, err := os.Lstat(dst); err != nil {
		t.Fatal(err)
	}
	// It is a valid filesystem of the size asked for.
	out, err := exec.Command("dumpe2fs", "-h", dst).CombinedOutput()
	if err != nil {
		t.Fatalf("dumpe2fs: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "Block count:") {
		t.Fatalf("not an ext4 image: %s", out)
	}
}

// TestDiskPoolTakeOnce: concurrent takes never get the same image, never an
// image of another size, and never overwrite an existing disk.
func TestDiskPoolTakeOnce(t *testing.T) {
	requireMkfs(t)
	p := newTestPool(t, t.TempDir(), 4)
	p.take(filepath.Join(t.TempDir(), "prime.img"), testDiskSize)
	waitPool(t, p, testDiskSize, 4)
	p.close() // no refill: exactly four images to share out

	if p.take(filepath.Join(t.TempDir(), "other.img"), 2*testDiskSize) {
		t.Fatal("took an image of another size")
	}
	existing := filepath.Join(t.TempDir(), "existing.img")
	if err := os.WriteFile(existing, []byte("files"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p.take(existing, testDiskSize) {
		t.Fatal("take replaced an existing disk")
	}
	if b, _ := os.ReadFile(existing); string(b) != "files" {
		t.Fatal("an existing disk was overwritten")
	}

	dst := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	inodes := map[uint64]string{}
	won := 0
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(dst, fmt.Sprintf("%d.img", i))
			if !p.take(path, testDiskSize) {
				return
			}
			var st syscall.Stat_t
			if err := syscall.Stat(path, &st); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			won++
			if other, dup := inodes[st.Ino]; dup {
				t.Errorf("one image went to %s and %s", other, path)
			}
			inodes[st.Ino] = path
			if st.Size != testDiskSize {
				t.Errorf("%s is %d bytes, want %d", path, st.Size, testDiskSize)
			}
		}()
	}
	wg.Wait()
	if won != 4 {
		t.Fatalf("%d takes succeeded from a pool of 4", won)
	}
}

func TestProcStatAlive(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want bool
	}{
		{"12 (sleep) S 1 12 12", true},
		{"12 (a) b) R 1", true},
		{"12 (paddock) Z 1 12", false},
		{"12 (x) X 1", false},
		{"12 (x)", false},
		{"garbage", false},
	} {
		if got := procStatAlive([]byte(tc.stat)); got != tc.want {
			t.Errorf("procStatAlive(%q) = %v, want %v", tc.stat, got, tc.want)
		}
	}
	if !processAlive(os.Getpid()) {
		t.Error("this process is not alive")
	}
}
