package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func execRoot(t *testing.T, d *daemon, id, script string) string {
	t.Helper()
	var out bytes.Buffer
	res, err := d.client.Exec(ctxT(t, 2*time.Minute), id, paddock.ExecOptions{Cmd: []string{"sh", "-c", script}, User: "root", Stdout: &out, Stderr: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: %v exit %v: %s", script, err, res, out.String())
	}
	return out.String()
}

// TestSnapshotRestoreForkExportImport walks the whole snapshot surface
// through the CLI: what a snapshot keeps (files, owners, modes, symlinks,
// deletions, opaque directories), chains, fork independence, export and
// import, and the refusals.
func TestSnapshotRestoreForkExportImport(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	src := strings.TrimSpace(d.must("create", "--image", "busybox", "--name", "dev"))
	execRoot(t, d, src, `set -e
		echo hello > /home/user/a.txt; chown 1000:1000 /home/user/a.txt; chmod 640 /home/user/a.txt
		ln -s a.txt /home/user/link
		rm /bin/vi
		rm -rf /etc && mkdir /etc && echo only > /etc/only`)
	snapID := strings.TrimSpace(d.must("snapshot", "create", "dev", "--name", "after-deps"))

	// Changes after the snapshot are not in it.
	execRoot(t, d, src, "echo later > /home/user/later")

	d.must("create", "--from-snapshot", "after-deps", "--name", "try1")
	check := `set -e
		test "$(cat /home/user/a.txt)" = hello
		test "$(stat -c %u:%g:%a /home/user/a.txt)" = 1000:1000:640
		test "$(readlink /home/user/link)" = a.txt
		test ! -e /bin/vi
		test "$(ls /etc)" = only
		test ! -e /home/user/later
		echo ok`
	if out := execRoot(t, d, "try1", check); out != "ok\n" {
		t.Fatalf("restored files: %q", out)
	}
	inspect := d.must("inspect", "try1")
	for _, want := range []string{"From snapshot:  " + snapID, "History:", "created"} {
		if !strings.Contains(inspect, want) {
			t.Errorf("inspect lacks %q:\n%s", want, inspect)
		}
	}

	// A snapshot of a restored sandbox stacks on its parent.
	execRoot(t, d, "try1", "echo second > /home/user/second")
	d.must("snapshot", "create", "try1", "--name", "chained", "--ttl", "never")
	var chained api.Snapshot
	mustJSON(t, d.must("--json", "snapshot", "inspect", "chained"), &chained)
	if len(chained.Layers) != 2 || chained.Parent != snapID || chained.ExpiresAt != nil {
		t.Fatalf("chained snapshot: %+v", chained)
	}
	d.must("create", "--from-snapshot", "chained", "--name", "try2")
	if out := execRoot(t, d, "try2", "cat /home/user/a.txt /home/user/second"); out != "hello\nsecond\n" {
		t.Fatalf("chain restore: %q", out)
	}

	// Fork: three independent copies of dev as it is now.
	ids := strings.Fields(d.must("fork", "dev", "--count", "3"))
	if len(ids) != 3 {
		t.Fatalf("fork printed %q", ids)
	}
	execRoot(t, d, ids[0], "echo mine > /home/user/later")
	for _, id := range ids[1:] {
		if out := execRoot(t, d, id, "cat /home/user/later"); out != "later\n" {
			t.Fatalf("fork %s sees another copy's write: %q", id, out)
		}
	}

	// Export, delete, import, restore.
	file := filepath.Join(t.TempDir(), "deps.pdk")
	d.must("snapshot", "export", "after-deps", "-o", file)
	d.must("snapshot", "rm", "after-deps")
	if _, errOut, code := d.run("create", "--from-snapshot", "after-deps"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("restore of a deleted snapshot: %d %s", code, errOut)
	}
	// Sandboxes restored from a deleted snapshot keep working, stopped and started.
	d.must("stop", "try1")
	d.must("start", "try1")
	if out := execRoot(t, d, "try1", "cat /home/user/a.txt"); out != "hello\n" {
		t.Fatalf("restored sandbox after its snapshot was deleted: %q", out)
	}
	d.must("snapshot", "import", file)
	d.must("create", "--from-snapshot", "after-deps", "--name", "try3")
	if out := execRoot(t, d, "try3", check); out != "ok\n" {
		t.Fatalf("restore of an imported snapshot: %q", out)
	}

	// Damaged files are refused with a checksum error and leave nothing.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(good, []byte("hello"))
	if off < 0 {
		t.Fatal("file content not found in the export")
	}
	flipped := bytes.Clone(good)
	flipped[off] = 'j'
	before := len(listSnapshots(t, d))
	for name, data := range map[string][]byte{"corrupted": flipped, "truncated": good[:len(good)*2/3]} {
		_, errOut, code := d.runStdin(data, "snapshot", "import", "-", "--name", "bad-"+name)
		if code == 0 || !strings.Contains(errOut, "checksum") {
			t.Errorf("%s file: exit %d: %s", name, code, errOut)
		}
	}
	if after := len(listSnapshots(t, d)); after != before {
		t.Errorf("refused imports left snapshots: %d -> %d", before, after)
	}

	// Bad input.
	for _, args := range [][]string{
		{"snapshot", "create", "dev", "--ttl", "soon"},
		{"snapshot", "create", "dev", "--name", "../x"},
		{"snapshot", "create", "dev", "--name", "chained"},
		{"fork", "dev", "--count", "0"},
		{"create", "--on-idle", "freeze"},
		{"snapshot", "inspect", "no-such-snapshot"},
	} {
		if _, errOut, code := d.run(args...); code == 0 || errOut == "" {
			t.Errorf("paddock %v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

func listSnapshots(t *testing.T, d *daemon) []api.Snapshot {
	t.Helper()
	l, err := d.client.ListSnapshots(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSnapshotWhileWriting: a process appends numbered lines as fast as it
// can while snapshots are taken; every restored file is a whole prefix of
// the sequence, never a torn line. Run on runc and gVisor.
func TestSnapshotWhileWriting(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	for _, rt := range []string{api.RuntimeRunc, api.RuntimeGVisor} {
		t.Run(rt, func(t *testing.T) {
			if rt == api.RuntimeGVisor {
				requireGVisor(t)
			}
			sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: rt})
			execOut(t, d, sb.ID, "sh", "-c", `(i=0; while true; do i=$((i+1)); echo "line-$i-end" >> /home/user/log; done) >/dev/null 2>&1 &`)
			time.Sleep(300 * time.Millisecond)
			for round := 0; round < 3; round++ {
				snap, err := d.client.CreateSnapshot(ctxT(t, 2*time.Minute), sb.ID, api.CreateSnapshotRequest{})
				if err != nil {
					t.Fatal(err)
				}
				r := create(t, d, api.CreateSandboxRequest{FromSnapshot: snap.ID, Runtime: rt})
				var buf bytes.Buffer
				if err := d.client.ReadFile(ctxT(t, time.Minute), r.ID, "/home/user/log", &buf); err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(buf.String(), "\n")
				if lines[len(lines)-1] != "" {
					t.Fatalf("round %d: torn last line %q", round, lines[len(lines)-1])
				}
				lines = lines[:len(lines)-1]
				if len(lines) == 0 {
					t.Fatalf("round %d: nothing written before the snapshot", round)
				}
				for i, l := range lines {
					if l != "line-"+strconv.Itoa(i+1)+"-end" {
						t.Fatalf("round %d: line %d is %q", round, i+1, l)
					}
				}
				// The source was thawed: it keeps writing.
				if out, _ := execOut(t, d, sb.ID, "sh", "-c", "wc -l < /home/user/log"); mustAtoi(t, out) <= len(lines) {
					t.Fatalf("round %d: the writer stopped after the snapshot", round)
				}
				_ = d.client.Delete(ctxT(t, time.Minute), r.ID)
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// TestSnapshotLayerDeletedFromDisk: restoring a snapshot whose layer is
// gone fails with a clear error and makes no sandbox.
func TestSnapshotLayerDeletedFromDisk(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	execOut(t, d, sb.ID, "sh", "-c", "echo x > /home/user/x")
	snap, err := d.client.CreateSnapshot(ctxT(t, time.Minute), sb.ID, api.CreateSnapshotRequest{Name: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(d.stateDir, "snapshots", "layers", strings.TrimPrefix(snap.Layers[0], "sha256:"))
	if err := os.RemoveAll(layer); err != nil {
		t.Fatal(err)
	}
	before, _ := d.client.List(ctxT(t, time.Minute), nil)
	_, errOut, code := d.run("create", "--from-snapshot", "doomed")
	if code == 0 || !strings.Contains(errOut, "missing from disk") {
		t.Fatalf("restore: exit %d: %s", code, errOut)
	}
	after, _ := d.client.List(ctxT(t, time.Minute), nil)
	if len(after) != len(before) {
		t.Fatalf("a failed restore left a sandbox: %d -> %d", len(before), len(after))
	}
	if err := d.client.ExportSnapshot(ctxT(t, time.Minute), "doomed", &bytes.Buffer{}); !errors.Is(err, paddock.ErrFailedPrecondition) {
		t.Fatalf("export of a damaged snapshot: %v", err)
	}
}

// checkStoreWhole opens a stopped daemon's snapshot store and checks that
// every layer matches its digest and every pool object its key.
func checkStoreWhole(t *testing.T, d *daemon) {
	t.Helper()
	ctx := ctxT(t, 5*time.Minute)
	ss, err := snapshot.Open(snapshot.Options{Dir: filepath.Join(d.stateDir, "snapshots")})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := ss.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if _, err := ss.VerifyLayer(ctx, l); err != nil {
			t.Errorf("layer after the kill: %v", err)
		}
		if err := ss.CheckLayer(ctx, l); err != nil {
			t.Errorf("layer seal after the kill: %v", err)
		}
	}
	if bad, err := ss.CheckPool(ctx); err != nil || len(bad) != 0 {
		t.Errorf("pool objects that do not match their keys after the kill: %v %v", bad, err)
	}
}

// TestSnapshotDiskFull: a snapshot store that fills up fails the snapshot
// with a clear error, keeps nothing of it, and thaws the sandbox.
func TestSnapshotDiskFull(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	d.stop()
	dir := filepath.Join(d.stateDir, "snapshots")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs for the snapshot store: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	d.start()
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	execOut(t, d, sb.ID, "sh", "-c", "dd if=/dev/zero of=/home/user/big bs=1M count=16 2>/dev/null")
	_, errOut, code := d.run("snapshot", "create", sb.ID, "--name", "toobig")
	if code == 0 || !strings.Contains(errOut, "no space") {
		t.Fatalf("snapshot on a full store: exit %d: %s", code, errOut)
	}
	if l := listSnapshots(t, d); len(l) != 0 {
		t.Fatalf("a failed snapshot is listed: %+v", l)
	}
	if e, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(e) != 0 {
		t.Fatalf("the failed snapshot left %d partial layers", len(e))
	}
	got, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
	if err != nil || got.State != api.StateRunning {
		t.Fatalf("sandbox after the failed snapshot: %+v %v", got, err)
	}
	if out, code := execOut(t, d, sb.ID, "echo", "thawed"); code != 0 || out != "thawed\n" {
		t.Fatalf("sandbox is not usable after the failed snapshot: %d %q", code, out)
	}
	// A small snapshot still fits.
	execOut(t, d, sb.ID, "rm", "/home/user/big")
	d.must("snapshot", "create", sb.ID, "--name", "small")
}

// TestPauseResumeCycles: fifty pause/resume cycles with a file written
// between each lose nothing, and a background process survives them all.
func TestPauseResumeCycles(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	execOut(t, d, sb.ID, "sh", "-c", "(sleep 3600) >/dev/null 2>&1 & echo $! > /tmp/bg")
	ctx := ctxT(t, 5*time.Minute)
	for i := 1; i <= 50; i++ {
		if _, err := d.client.Pause(ctx, sb.ID); err != nil {
			t.Fatalf("cycle %d: pause: %v", i, err)
		}
		if _, err := d.client.Resume(ctx, sb.ID); err != nil {
			t.Fatalf("cycle %d: resume: %v", i, err)
		}
		content := fmt.Sprintf("cycle %d\n", i)
		if _, err := d.client.WriteFile(ctx, sb.ID, fmt.Sprintf("/home/user/c/%02d", i), strings.NewReader(content), 0o644); err != nil {
			t.Fatalf("cycle %d: write: %v", i, err)
		}
	}
	out, _ := execOut(t, d, sb.ID, "sh", "-c", "cat /home/user/c/*; kill -0 $(cat /tmp/bg) && echo bg-alive")
	var want strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&want, "cycle %d\n", i)
	}
	want.WriteString("bg-alive\n")
	if out != want.String() {
		t.Fatalf("after 50 cycles:\n%s", out)
	}
}

// TestIdlePolicies: on_idle snapshot frees compute and the next request
// restores the files into the same id; on_idle pause freezes; both say so
// in the state history.
func TestIdlePolicies(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	snapID := strings.TrimSpace(d.must("create", "--image", "busybox", "--sleep-after", "1s", "--on-idle", "snapshot"))
	pauseID := strings.TrimSpace(d.must("create", "--image", "busybox", "--sleep-after", "1s", "--on-idle", "pause"))
	execOut(t, d, snapID, "sh", "-c", "echo kept > /home/user/k")
	execOut(t, d, pauseID, "sh", "-c", "echo kept > /home/user/k")
	waitState(t, d, snapID, api.StateStopped)
	waitState(t, d, pauseID, api.StatePaused)
	if _, err := os.Stat(filepath.Join(d.stateDir, "runtime", "runc", "sandboxes", snapID)); err == nil {
		t.Error("an idle-snapshotted sandbox kept its compute directory")
	}
	// The idle snapshot is a snapshot: recorded in the ledger before the
	// stop, listed, and named by the sandbox.
	idleSnap := idleSnapshotEntry(t, d, snapID)
	if s, err := d.client.GetSnapshot(ctxT(t, time.Minute), idleSnap); err != nil || s.Sandbox != snapID || s.ExpiresAt == nil {
		t.Fatalf("idle snapshot %s: %+v %v", idleSnap, s, err)
	}
	if sb, err := d.client.Get(ctxT(t, time.Minute), snapID); err != nil || sb.FromSnapshot != idleSnap {
		t.Fatalf("sandbox after its idle snapshot: %+v %v", sb, err)
	}
	for _, id := range []string{snapID, pauseID} {
		if out, code := execOut(t, d, id, "cat", "/home/user/k"); code != 0 || out != "kept\n" {
			t.Fatalf("%s after idling: %d %q", id, code, out)
		}
	}
	// The request that restored it is in the ledger after the start; the
	// last restore is from the last idle snapshot.
	kinds, l := ledgerKinds(t, d, snapID)
	restored := false
	for i := 1; i < len(kinds); i++ {
		if kinds[i] != api.LedgerRestore {
			continue
		}
		r := l.Entries[i]
		if kinds[i-1] != api.LedgerStart || r.Data["idle"] != "true" || r.Data["from_sandbox"] != snapID {
			t.Fatalf("restore entry %+v; kinds %v", r, kinds)
		}
		restored = r.Data["snapshot"] == idleSnap
	}
	if !restored {
		t.Fatalf("no restore from %s last after the restoring request: %v", idleSnap, kinds)
	}
	insp := d.must("inspect", snapID)
	for _, want := range []string{"On idle:", "snapshot", "files snapshotted as layer", "restoring its files from snapshot layers (snapshot " + idleSnap + ")"} {
		if !strings.Contains(insp, want) {
			t.Errorf("inspect lacks %q:\n%s", want, insp)
		}
	}
	if insp := d.must("inspect", pauseID); !strings.Contains(insp, "paused, memory and processes kept") || !strings.Contains(insp, "request to a paused sandbox") {
		t.Errorf("pause history:\n%s", insp)
	}
}

// idleSnapshotEntry finds the "snapshot" entry an idle snapshot recorded,
// checks a "stop" entry follows it, and returns the snapshot's id.
func idleSnapshotEntry(t *testing.T, d *daemon, id string) string {
	t.Helper()
	kinds, l := ledgerKinds(t, d, id)
	// The last one: on a busy host a sandbox may idle before the test's
	// first request and again after it, and it is restored from the last.
	for i := len(l.Entries) - 1; i >= 0; i-- {
		e := l.Entries[i]
		if e.Kind != api.LedgerSnapshot || e.Data["idle"] != "true" {
			continue
		}
		if e.Data["snapshot"] == "" || !strings.HasPrefix(e.Data["layer"], "sha256:") || i+1 >= len(kinds) || kinds[i+1] != api.LedgerStop {
			t.Fatalf("idle snapshot entry %+v; kinds %v", e, kinds)
		}
		return e.Data["snapshot"]
	}
	t.Fatalf("no idle snapshot entry in the ledger of %s: %v", id, kinds)
	return ""
}

func waitState(t *testing.T, d *daemon, id, state string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sb, err := d.client.Get(ctxT(t, time.Minute), id)
		if err == nil && sb.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become %s: %+v %v", id, state, sb, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
