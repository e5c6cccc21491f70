package e2e

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the daemon's own SQLite driver, to hold its write lock

	"github.com/paddock-dev/paddock/api"
)

// layerDirs lists the layer directories of a daemon's snapshot store.
func layerDirs(t *testing.T, d *daemon) []string {
	t.Helper()
	e, err := os.ReadDir(filepath.Join(d.stateDir, "snapshots", "layers"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range e {
		out = append(out, x.Name())
	}
	return out
}

// tmpDirs lists the partial layers in a daemon's snapshot store.
func tmpDirs(t *testing.T, d *daemon) []string {
	t.Helper()
	e, err := os.ReadDir(filepath.Join(d.stateDir, "snapshots", "tmp"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, x := range e {
		out = append(out, x.Name())
	}
	return out
}

func newLayers(now, before []string) []string {
	var out []string
	for _, l := range now {
		if !slices.Contains(before, l) {
			out = append(out, l)
		}
	}
	return out
}

// snapshotAsync starts a snapshot; the channel gets its error.
func snapshotAsync(t *testing.T, d *daemon, id, name string) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := d.client.CreateSnapshot(ctxT(t, 5*time.Minute), id, api.CreateSnapshotRequest{Name: name})
		done <- err
	}()
	return done
}

// watchFor polls cond every millisecond for up to limit, to act the moment
// it holds.
func watchFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdWriteLock takes SQLite's write lock on the daemon's database, as a
// slow disk or another writer would: reads go on, the daemon's next write
// waits. The returned function releases it.
func holdWriteLock(t *testing.T, d *daemon) func() {
	t.Helper()
	u := url.URL{Scheme: "file", Path: filepath.Join(d.stateDir, "paddock.db"), RawQuery: "_pragma=busy_timeout(10000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// TestSnapshotDaemonKilled: a daemon killed with SIGKILL at each point of a
// snapshot restarts with every listed snapshot complete and restorable,
// nothing half-written listed or left in tmp/, and a layer that was
// committed to disk but never recorded collected. The kill points are
// placed by watching the store, not by hooks in the binary: after the
// snapshot's response (complete); while the copy of a 256 MiB layer is
// under way (checked after the kill: a partial directory in tmp/ and no
// new layer); and between the layer's commit and its record, held apart
// by taking SQLite's write lock as another writer would (checked after
// the kill: a new layer and no record).
func TestSnapshotDaemonKilled(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", KeepAlive: true})
	const files, mib = 256, 1
	execRoot(t, d, sb.ID, "mkdir -p /home/user/big && for i in $(seq 1 256); do dd if=/dev/zero of=/home/user/big/$i bs=1M count=1 2>/dev/null; done")
	bigBytes := files * mib << 20
	restart := func() {
		t.Helper()
		d.start()
		// The store empties tmp/ before the daemon answers; what the
		// collector removes passes through it (rm-*) and is gone soon.
		for _, p := range tmpDirs(t, d) {
			if !strings.HasPrefix(p, "rm-") {
				t.Fatalf("partial layer left after the restart: %s", p)
			}
		}
		watchFor(t, 30*time.Second, "tmp/ to empty", func() bool { return len(tmpDirs(t, d)) == 0 })
		// A kill during the copy leaves the source frozen; the restart
		// thaws it, since its record says it runs.
		if got, err := d.client.Get(ctxT(t, time.Minute), sb.ID); err != nil || got.State != api.StateRunning {
			t.Fatalf("source after the restart: %v %+v, want running", err, got)
		}
		if out, code := execOut(t, d, sb.ID, "echo", "alive"); code != 0 || out != "alive\n" {
			t.Fatalf("source after the kill: %d %q", code, out)
		}
	}
	checkRestorable := func(name, marker string) {
		t.Helper()
		r := create(t, d, api.CreateSandboxRequest{FromSnapshot: name})
		out := execRoot(t, d, r.ID, "cat /home/user/big/* | wc -c; cat /home/user/marker")
		if f := strings.Fields(out); len(f) != 2 || mustAtoi(t, f[0]) != bigBytes || f[1] != marker {
			t.Fatalf("snapshot %s restored: %q, want %d bytes and marker %s", name, out, bigBytes, marker)
		}
		_ = d.client.Delete(ctxT(t, time.Minute), r.ID)
	}
	listed := func() map[string]api.Snapshot {
		t.Helper()
		m := map[string]api.Snapshot{}
		for _, s := range listSnapshots(t, d) {
			m[s.Name] = s
		}
		return m
	}

	// 1. Killed right after the snapshot answered: it is complete.
	execRoot(t, d, sb.ID, "echo one > /home/user/marker")
	if _, err := d.client.CreateSnapshot(ctxT(t, 5*time.Minute), sb.ID, api.CreateSnapshotRequest{Name: "answered"}); err != nil {
		t.Fatal(err)
	}
	d.kill9()
	restart()
	if _, ok := listed()["answered"]; !ok {
		t.Fatalf("a snapshot that answered is gone after the kill: %v", listed())
	}
	checkRestorable("answered", "one")

	// 2. Killed during the copy.
	execRoot(t, d, sb.ID, "echo two > /home/user/marker")
	before := layerDirs(t, d)
	done := snapshotAsync(t, d, sb.ID, "mid-copy")
	watchFor(t, time.Minute, "the copy to start", func() bool {
		for _, p := range tmpDirs(t, d) {
			if e, _ := os.ReadDir(filepath.Join(d.stateDir, "snapshots", "tmp", p)); len(e) > 0 {
				return true
			}
		}
		return false
	})
	d.kill9()
	<-done
	if len(tmpDirs(t, d)) == 0 || len(newLayers(layerDirs(t, d), before)) != 0 {
		t.Fatalf("the kill did not land during the copy: tmp %v, new layers %v", tmpDirs(t, d), newLayers(layerDirs(t, d), before))
	}
	restart()
	if _, ok := listed()["mid-copy"]; ok {
		t.Fatal("a snapshot killed during its copy is listed")
	}
	if l := newLayers(layerDirs(t, d), before); len(l) != 0 {
		t.Fatalf("a copy killed half-way left layers: %v", l)
	}

	// 3. Killed after the layer was committed, before its record.
	execRoot(t, d, sb.ID, "echo three > /home/user/marker")
	before = layerDirs(t, d)
	release := holdWriteLock(t, d)
	done = snapshotAsync(t, d, sb.ID, "unrecorded")
	watchFor(t, 2*time.Minute, "the layer to be committed", func() bool { return len(newLayers(layerDirs(t, d), before)) > 0 })
	d.kill9()
	<-done
	orphan := newLayers(layerDirs(t, d), before)
	release()
	if len(orphan) != 1 {
		t.Fatalf("new layers at the kill: %v", orphan)
	}
	restart()
	if _, ok := listed()["unrecorded"]; ok {
		t.Fatal("a snapshot whose record was never written is listed")
	}
	watchFor(t, 30*time.Second, "the orphaned layer to be collected", func() bool {
		return !slices.Contains(layerDirs(t, d), orphan[0])
	})

	// Whatever was killed, every listed snapshot is whole, and every stored
	// layer belongs to one.
	all := listed()
	if len(all) != 1 {
		t.Fatalf("snapshots after three kills: %v", all)
	}
	checkRestorable("answered", "one")
	var named []string
	for _, s := range all {
		for _, l := range s.Layers {
			named = append(named, strings.TrimPrefix(l, "sha256:"))
		}
	}
	if stray := newLayers(layerDirs(t, d), named); len(stray) != 0 {
		t.Fatalf("layers no snapshot names: %v", stray)
	}
	// Every layer and every pool object left is whole.
	d.stop()
	checkStoreWhole(t, d)
}
