package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// diskInode is the inode of a sandbox's disk image, or 0 once it is gone.
func diskInode(t *testing.T, d *daemon, id string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(d.stateDir, "runtime", "runc", "sandboxes", id, "disk.img"), &st); err != nil {
		return 0
	}
	return st.Ino
}

// poolImages lists the ready images of the daemon's disk pool by inode.
func poolImages(t *testing.T, d *daemon) map[uint64]string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(d.stateDir, "runtime", "runc", "disks", "*.img"))
	out := map[uint64]string{}
	for _, n := range names {
		var st syscall.Stat_t
		if syscall.Stat(n, &st) == nil {
			out[st.Ino] = filepath.Base(n)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leftOf says what of a destroyed sandbox is still on the host: its
// directory or any mount under it.
func leftOf(d *daemon, id string) string {
	dir := filepath.Join(d.stateDir, "runtime", "runc", "sandboxes", id)
	if _, err := os.Lstat(dir); err == nil {
		return "directory " + dir
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], "/"+id+"/") {
			return "mount " + f[4]
		}
	}
	return ""
}

// TestDiskPool: sandboxes get pre-formatted disk images from the pool, each
// image goes to one sandbox only, and the size cap holds on a pooled image.
func TestDiskPool(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	res := api.Resources{DiskMB: 72}
	first := create(t, d, api.CreateSandboxRequest{Image: "busybox", Resources: res})
	waitFor(t, "the disk pool to fill", func() bool { return len(poolImages(t, d)) >= 2 })
	pooled := poolImages(t, d)

	// Two creates at once: each takes its own pooled image.
	var wg sync.WaitGroup
	sbs := make([]*api.Sandbox, 2)
	for i := range sbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := d.client.Create(ctxT(t, time.Minute), api.CreateSandboxRequest{Image: "busybox", Resources: res})
			if err != nil {
				t.Error(err)
				return
			}
			sbs[i] = sb
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[uint64]string{diskInode(t, d, first.ID): first.ID}
	for _, sb := range sbs {
		ino := diskInode(t, d, sb.ID)
		if _, ok := pooled[ino]; !ok {
			t.Errorf("sandbox %s did not get a pooled image (pool had %v)", sb.ID, pooled)
		}
		if other, dup := seen[ino]; dup {
			t.Fatalf("sandboxes %s and %s share one disk image", other, sb.ID)
		}
		seen[ino] = sb.ID
	}

	// The cap holds on a pooled image, and the sandbox sees its own size.
	sb := sbs[0]
	out, _ := execOut(t, d, sb.ID, "sh", "-c", "dd if=/dev/zero of=/home/user/fill bs=1M count=100 2>&1; echo rc=$?")
	if !strings.Contains(out, "No space left on device") {
		t.Fatalf("disk fill on a pooled image: %q; want ENOSPC", out)
	}
	// Nothing another sandbox wrote is visible: every image starts empty.
	if out, code := execOut(t, d, sbs[1].ID, "ls", "/home/user"); code != 0 || strings.Contains(out, "fill") {
		t.Fatalf("second sandbox's home: %d %q", code, out)
	}
}

// TestDeleteFinishesInBackground: a delete returns once the compute is
// gone; the files follow, and a daemon killed before they do removes them
// at its next start. What a killed daemon left in the disk pool is sorted
// then too: half-made images removed, complete ones reused.
func TestDeleteFinishesInBackground(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	res := api.Resources{DiskMB: 72}
	a := create(t, d, api.CreateSandboxRequest{Image: "busybox", Resources: res})
	b := create(t, d, api.CreateSandboxRequest{Image: "busybox", Resources: res})
	d.must("rm", a.ID)
	if _, _, code := d.run("exec", a.ID, "--", "true"); code == 0 {
		t.Fatal("exec into a deleted sandbox worked")
	}
	waitFor(t, "the deleted sandbox's files to go", func() bool { return leftOf(d, a.ID) == "" })

	// Delete, then kill the daemon before (or after: the outcome must be
	// the same) it removed the files.
	waitFor(t, "the disk pool to fill", func() bool { return len(poolImages(t, d)) >= 2 })
	d.must("rm", b.ID)
	d.kill9()
	pool := filepath.Join(d.stateDir, "runtime", "runc", "disks")
	half := filepath.Join(pool, ".tmp-00000000deadbeef")
	if err := os.WriteFile(half, []byte("half-made"), 0o600); err != nil {
		t.Fatal(err)
	}
	kept := poolImages(t, d)
	d.start()
	if left := leftOf(d, b.ID); left != "" {
		t.Fatalf("after kill -9 and restart, the deleted sandbox left %s", left)
	}
	if _, err := os.Lstat(half); err == nil {
		t.Fatal("a half-made pool image survived the restart")
	}
	c := create(t, d, api.CreateSandboxRequest{Image: "busybox", Resources: res})
	if _, ok := kept[diskInode(t, d, c.ID)]; !ok {
		t.Fatalf("a complete pooled image from before the restart was not reused (pool had %v)", kept)
	}
	if out, code := execOut(t, d, c.ID, "echo", "ok"); code != 0 || out != "ok\n" {
		t.Fatalf("sandbox on a reused image: %d %q", code, out)
	}
}
