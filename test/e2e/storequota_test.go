package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func layerCount(t *testing.T, d *daemon) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.stateDir, "snapshots", "layers"))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func snapshotNames(t *testing.T, d *daemon) string {
	t.Helper()
	list, err := d.client.ListSnapshots(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// TestSnapshotStoreQuota: with PADDOCK_SNAPSHOT_STORE_MAX set, a snapshot,
// an import and a local backup that would pass the cap are refused with
// resource_exhausted naming used and limit, and leave nothing behind; a
// layer stored already (an import of it) costs nothing more.
func TestSnapshotStoreQuota(t *testing.T) {
	const limit = 1 << 20
	d := startDaemon(t, daemonOpts{env: []string{"PADDOCK_SNAPSHOT_STORE_MAX=1M"}})
	ctx := ctxT(t, 5*time.Minute)
	fill := func(id, file string, kib string) {
		t.Helper()
		if out, code := execOut(t, d, id, "dd", "if=/dev/urandom", "of=/home/user/"+file, "bs=1k", "count="+kib); code != 0 {
			t.Fatalf("dd: %s", out)
		}
	}
	// b: 400 KiB, exported, then deleted (its layer goes with it).
	sb1 := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	fill(sb1.ID, "b.bin", "400")
	d.must("snapshot", "create", sb1.ID, "--name", "b")
	bFile := filepath.Join(t.TempDir(), "b.pdk")
	d.must("snapshot", "export", "b", "-o", bFile)
	d.must("snapshot", "rm", "b")

	// a: 700 KiB, fits.
	sb2 := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	fill(sb2.ID, "a.bin", "700")
	d.must("snapshot", "create", sb2.ID, "--name", "a")
	aFile := filepath.Join(t.TempDir(), "a.pdk")
	d.must("snapshot", "export", "a", "-o", aFile)
	layers := layerCount(t, d)

	var in api.Info
	if err := json.Unmarshal([]byte(d.must("info", "--json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.SnapshotStore == nil || in.SnapshotStore.LimitBytes != limit || in.SnapshotStore.UsedBytes < 700<<10 || in.SnapshotStore.UsedBytes > limit {
		t.Fatalf("info snapshot_store = %+v", in.SnapshotStore)
	}
	if out := d.must("info"); !strings.Contains(out, "Snapshot store:") || !strings.Contains(out, "1048576") {
		t.Fatalf("info does not show the store's use and limit:\n%s", out)
	}

	full := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, paddock.ErrResourceExhausted) || !strings.Contains(err.Error(), "snapshot store is full") || !strings.Contains(err.Error(), "1048576") {
			t.Fatalf("%s over the limit: %v; want resource exhausted naming the limit", what, err)
		}
		if got := layerCount(t, d); got != layers {
			t.Fatalf("%s over the limit left layers: %d, want %d", what, got, layers)
		}
		if got := snapshotNames(t, d); got != "a" {
			t.Fatalf("%s over the limit left snapshots: %s", what, got)
		}
	}
	// A second snapshot of sb2 with 400 KiB more: over.
	fill(sb2.ID, "c.bin", "400")
	_, err := d.client.CreateSnapshot(ctx, sb2.ID, api.CreateSnapshotRequest{Name: "c"})
	full("snapshot", err)
	_, errOut, code := d.run("snapshot", "create", sb2.ID)
	if code == 0 || !strings.Contains(errOut, "snapshot store is full") {
		t.Fatalf("CLI snapshot over the limit: exit %d, %q", code, errOut)
	}
	// Importing b (400 KiB of new layer): over.
	f, err := os.Open(bFile)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.client.ImportSnapshot(ctx, f, paddock.ImportOptions{Name: "b2"})
	f.Close()
	full("import", err)
	// A local backup of 400 KiB of random bytes: over; an S3 one would not count.
	_, err = d.client.CreateBackup(ctx, sb1.ID, api.CreateBackupRequest{Path: "/home/user"})
	full("backup", err)
	if entries, _ := os.ReadDir(filepath.Join(d.stateDir, "backups")); len(entries) != 0 {
		t.Fatalf("a refused backup left files: %v", entries)
	}
	// Importing a again stores nothing new: allowed.
	d.must("snapshot", "import", aFile, "--name", "a2")
	if got := layerCount(t, d); got != layers {
		t.Fatalf("importing a stored layer again added layers: %d, want %d", got, layers)
	}
	// An idle snapshot that does not fit stops the sandbox instead.
	idle := strings.TrimSpace(d.must("create", "--image", "busybox", "--sleep-after", "1s", "--on-idle", "snapshot"))
	fill(idle, "i.bin", "400")
	waitState(t, d, idle, api.StateStopped)
	if out := d.must("inspect", idle); !strings.Contains(out, "snapshot store full, stopped instead") {
		t.Fatalf("idle snapshot over the limit: history does not say it stopped instead:\n%s", out)
	}
	if got := layerCount(t, d); got != layers {
		t.Fatalf("an idle snapshot over the limit left layers: %d, want %d", got, layers)
	}
	if out, _ := execOut(t, d, idle, "ls", "/home/user/i.bin"); !strings.Contains(out, "i.bin") {
		t.Fatalf("the stopped sandbox lost its files: %q", out)
	}
	// After deleting, there is room again.
	d.must("snapshot", "rm", "a2")
	d.must("snapshot", "rm", "a")
	execOut(t, d, sb2.ID, "rm", "/home/user/a.bin")
	d.must("snapshot", "create", sb2.ID, "--name", "c")
	// The store counts each shared file once: two more snapshots of sb2,
	// each with a small change, share c.bin (400 KiB) and fit, where
	// three full copies of it would not.
	for _, name := range []string{"c2", "c3"} {
		fill(sb2.ID, name+".bin", "4")
		snap, err := d.client.CreateSnapshot(ctx, sb2.ID, api.CreateSnapshotRequest{Name: name})
		if err != nil {
			t.Fatalf("snapshot %s sharing c.bin: %v", name, err)
		}
		if snap.SizeAdded > 64<<10 || snap.Size < 400<<10 {
			t.Fatalf("snapshot %s: size %d, added %d; want the 400 KiB file shared", name, snap.Size, snap.SizeAdded)
		}
	}
}
