package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// readFileIn returns a file of a sandbox, or "" with the exec's exit code
// when it cannot be read.
func readFileIn(t *testing.T, d *daemon, id, path string) string {
	t.Helper()
	out, code := execOut(t, d, id, "sh", "-c", "cat "+path+" 2>/dev/null || echo '<absent>'")
	if code != 0 {
		t.Fatalf("read %s in %s: exit %d: %s", path, id, code, out)
	}
	return strings.TrimSpace(out)
}

func within(t *testing.T, what string, got *time.Time, from, to time.Time) {
	t.Helper()
	testdaemon.Within(t, what, got, from, to)
}

// TestSnapshotListTTLAndExpiry: snapshot ls (table and --json) shows each
// snapshot's handle; snapshot ttl (PATCH) sets the TTL and the expiry; a
// restore renews to now + TTL once the sandbox runs and a refused create
// renews nothing; an expired snapshot leaves the list at once and the
// collector deletes its record and its layer from disk.
func TestSnapshotListTTLAndExpiry(t *testing.T) {
	d := startDaemon(t, daemonOpts{env: []string{"PADDOCK_SNAPSHOT_EXPIRY_INTERVAL=1s"}})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Name: "ttl-src"})
	execOut(t, d, sb.ID, "sh", "-c", "echo one > /home/user/f")
	keepID := strings.TrimSpace(d.must("snapshot", "create", "ttl-src", "--name", "keep", "--ttl", "never"))
	before := time.Now()
	d.must("snapshot", "create", "ttl-src", "--name", "hourly", "--ttl", "1h")
	after := time.Now()

	table := d.must("snapshot", "ls")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "EXPIRES") {
		t.Fatalf("snapshot ls:\n%s", table)
	}
	if !strings.Contains(lines[1], keepID) || !strings.Contains(lines[1], "keep") || !strings.HasSuffix(strings.TrimSpace(lines[1]), "never") ||
		!strings.Contains(lines[2], "hourly") || strings.HasSuffix(strings.TrimSpace(lines[2]), "never") {
		t.Fatalf("snapshot ls rows:\n%s", table)
	}
	var list api.SnapshotList
	mustJSON(t, d.must("--json", "snapshot", "ls"), &list)
	if len(list.Snapshots) != 2 {
		t.Fatalf("snapshot ls --json: %+v", list)
	}
	keep, hourly := list.Snapshots[0], list.Snapshots[1]
	for _, s := range list.Snapshots {
		if s.ID == "" || s.Size <= 0 || s.ImageDigest != sb.ImageDigest || s.Sandbox != sb.ID || s.CreatedAt.IsZero() || len(s.Layers) != 1 || s.Parent != "" {
			t.Errorf("snapshot handle: %+v", s)
		}
	}
	if keep.ID != keepID || keep.Name != "keep" || keep.TTL != "never" || keep.ExpiresAt != nil {
		t.Errorf("keep: %+v", keep)
	}
	if hourly.Name != "hourly" || hourly.TTL != "1h0m0s" {
		t.Errorf("hourly: %+v", hourly)
	}
	within(t, "hourly", hourly.ExpiresAt, before.Add(time.Hour), after.Add(time.Hour))

	// PATCH through the SDK and the CLI: the TTL and the expiry change together.
	before = time.Now()
	got, err := d.client.SetSnapshotTTL(ctxT(t, time.Minute), "keep", "2h")
	if err != nil || got.TTL != "2h0m0s" {
		t.Fatalf("set ttl 2h: %+v %v", got, err)
	}
	within(t, "keep after ttl 2h", got.ExpiresAt, before.Add(2*time.Hour), time.Now().Add(2*time.Hour))
	if out := d.must("snapshot", "ttl", "keep", "never"); !strings.Contains(out, keepID+" never") {
		t.Fatalf("snapshot ttl keep never: %q", out)
	}
	if s, err := d.client.GetSnapshot(ctxT(t, time.Minute), "keep"); err != nil || s.ExpiresAt != nil || s.TTL != "never" {
		t.Fatalf("keep after ttl never: %+v %v", s, err)
	}
	for _, bad := range []string{"soon", "0s", "500ms"} {
		if _, errOut, code := d.run("snapshot", "ttl", "keep", bad); code == 0 || !strings.Contains(errOut, "ttl") {
			t.Errorf("snapshot ttl keep %s: exit %d: %s", bad, code, errOut)
		}
	}

	// A restore renews the expiry to now + TTL: a TTL changed after the
	// snapshot was taken is what it renews by, not the snapshot's age.
	time.Sleep(2 * time.Second)
	d.must("snapshot", "ttl", "hourly", "1h")
	before = time.Now()
	r := create(t, d, api.CreateSandboxRequest{FromSnapshot: "hourly", Name: "ttl-copy"})
	after = time.Now()
	renewed, err := d.client.GetSnapshot(ctxT(t, time.Minute), "hourly")
	if err != nil {
		t.Fatal(err)
	}
	within(t, "hourly after a restore", renewed.ExpiresAt, before.Add(time.Hour), after.Add(time.Hour))
	// A create refused after planning (the name is taken) renews nothing.
	time.Sleep(1100 * time.Millisecond)
	if _, err := d.client.Create(ctxT(t, time.Minute), api.CreateSandboxRequest{FromSnapshot: "hourly", Name: "ttl-copy"}); !errors.Is(err, paddock.ErrConflict) {
		t.Fatalf("create over a taken name: %v", err)
	}
	if s, err := d.client.GetSnapshot(ctxT(t, time.Minute), "hourly"); err != nil || !s.ExpiresAt.Equal(*renewed.ExpiresAt) {
		t.Fatalf("a refused create moved the expiry: %+v -> %+v (%v)", renewed.ExpiresAt, s, err)
	}
	if out := readFileIn(t, d, r.ID, "/home/user/f"); out != "one" {
		t.Fatalf("restored file: %q", out)
	}

	// Expiry: a snapshot of its own content with a 2s TTL.
	execOut(t, d, sb.ID, "sh", "-c", "echo brief > /home/user/only-in-brief")
	brief, err := d.client.CreateSnapshot(ctxT(t, time.Minute), sb.ID, api.CreateSnapshotRequest{Name: "brief", TTL: "2s"})
	if err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(d.stateDir, "snapshots", "layers", strings.TrimPrefix(brief.Layers[0], "sha256:"))
	if _, err := os.Stat(layer); err != nil {
		t.Fatalf("brief's layer: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, statErr := os.Stat(layer)
		_, getErr := d.client.GetSnapshot(ctxT(t, time.Minute), brief.ID)
		if errors.Is(statErr, os.ErrNotExist) && errors.Is(getErr, paddock.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("brief not collected: layer %v, get %v", statErr, getErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(d.logs.String(), `msg="snapshot expired"`) || !strings.Contains(d.logs.String(), "snapshot="+brief.ID) {
		t.Error("the daemon did not log the expiry")
	}
	if _, errOut, code := d.run("create", "--from-snapshot", "brief"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("restore of an expired snapshot: exit %d: %s", code, errOut)
	}
	names := map[string]bool{}
	for _, s := range listSnapshots(t, d) {
		names[s.Name] = true
	}
	if len(names) != 2 || !names["keep"] || !names["hourly"] {
		t.Fatalf("after the expiry: %v", names)
	}
}

// TestSnapshotStoppedAndPaused: a paused and a stopped sandbox can be
// snapshotted; each stays as it was, and the snapshot restores its files.
func TestSnapshotStoppedAndPaused(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", KeepAlive: true})
	execOut(t, d, sb.ID, "sh", "-c", "echo before-pause > /home/user/a")
	ctx := ctxT(t, 5*time.Minute)

	if _, err := d.client.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	paused, err := d.client.CreateSnapshot(ctx, sb.ID, api.CreateSnapshotRequest{Name: "of-paused"})
	if err != nil {
		t.Fatalf("snapshot of a paused sandbox: %v", err)
	}
	if got, err := d.client.Get(ctx, sb.ID); err != nil || got.State != api.StatePaused {
		t.Fatalf("after the snapshot: %+v %v, want still paused", got, err)
	}
	if _, err := d.client.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	execOut(t, d, sb.ID, "sh", "-c", "echo before-stop > /home/user/b")
	if _, err := d.client.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	stopped, err := d.client.CreateSnapshot(ctx, sb.ID, api.CreateSnapshotRequest{Name: "of-stopped"})
	if err != nil {
		t.Fatalf("snapshot of a stopped sandbox: %v", err)
	}
	if got, err := d.client.Get(ctx, sb.ID); err != nil || got.State != api.StateStopped {
		t.Fatalf("after the snapshot: %+v %v, want still stopped", got, err)
	}

	for _, tc := range []struct {
		snap string
		want string
	}{
		{paused.ID, "before-pause <absent>"},
		{stopped.ID, "before-pause before-stop"},
	} {
		r := create(t, d, api.CreateSandboxRequest{FromSnapshot: tc.snap})
		got := readFileIn(t, d, r.ID, "/home/user/a") + " " + readFileIn(t, d, r.ID, "/home/user/b")
		if got != tc.want {
			t.Errorf("restore of %s: %q, want %q", tc.snap, got, tc.want)
		}
	}
	// The stopped source starts again with its files.
	if out := readFileIn(t, d, sb.ID, "/home/user/b"); out != "before-stop" {
		t.Fatalf("source after its snapshot: %q", out)
	}
}

// TestRestoreOntoOtherImageRefused: over the real API, a snapshot restores
// only onto its own image digest; another image is refused with a clear
// error and nothing is made.
func TestRestoreOntoOtherImageRefused(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	execOut(t, d, sb.ID, "sh", "-c", "echo x > /home/user/x")
	if _, err := d.client.CreateSnapshot(ctxT(t, time.Minute), sb.ID, api.CreateSnapshotRequest{Name: "on-busybox"}); err != nil {
		t.Fatal(err)
	}
	before, _ := d.client.List(ctxT(t, time.Minute), nil)
	_, err := d.client.Create(ctxT(t, 5*time.Minute), api.CreateSandboxRequest{FromSnapshot: "on-busybox", Image: "base"})
	if !errors.Is(err, paddock.ErrFailedPrecondition) {
		t.Fatalf("restore onto base: %v, want failed_precondition", err)
	}
	for _, want := range []string{sb.ImageDigest, "cannot be restored onto base", "leave the image out"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, errOut, code := d.run("create", "--from-snapshot", "on-busybox", "--image", "base"); code == 0 || !strings.Contains(errOut, "cannot be restored onto base") {
		t.Fatalf("CLI restore onto base: exit %d: %s", code, errOut)
	}
	after, _ := d.client.List(ctxT(t, time.Minute), nil)
	if len(after) != len(before) {
		t.Fatalf("a refused restore made a sandbox: %d -> %d", len(before), len(after))
	}
	// Its own image, by name or by digest, is accepted.
	for _, img := range []string{"busybox", sb.ImageDigest} {
		r := create(t, d, api.CreateSandboxRequest{FromSnapshot: "on-busybox", Image: img})
		if r.ImageDigest != sb.ImageDigest {
			t.Fatalf("restore with image %s: digest %s", img, r.ImageDigest)
		}
	}
}

// TestForkIndependence: a fork's copies and its source share nothing after
// the fork, in both directions: a copy's write is seen neither by the
// source nor by the other copies, and the source's later writes are seen
// by no copy.
func TestForkIndependence(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	src := create(t, d, api.CreateSandboxRequest{Image: "busybox", KeepAlive: true})
	execOut(t, d, src.ID, "sh", "-c", "echo orig > /home/user/f")
	res, err := d.client.Fork(ctxT(t, 5*time.Minute), src.ID, api.ForkRequest{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sandboxes) != 3 {
		t.Fatalf("fork made %d copies", len(res.Sandboxes))
	}
	a, b, c := res.Sandboxes[0].ID, res.Sandboxes[1].ID, res.Sandboxes[2].ID
	for _, id := range []string{a, b, c} {
		if got := readFileIn(t, d, id, "/home/user/f"); got != "orig" {
			t.Fatalf("copy %s: %q", id, got)
		}
	}

	// A copy writes: nobody else sees it.
	execOut(t, d, a, "sh", "-c", "echo from-a > /home/user/f; echo new > /home/user/only-a")
	for _, id := range []string{src.ID, b, c} {
		if got := readFileIn(t, d, id, "/home/user/f") + " " + readFileIn(t, d, id, "/home/user/only-a"); got != "orig <absent>" {
			t.Errorf("%s sees copy a's writes: %q", id, got)
		}
	}
	// The source writes after the fork: no copy sees it.
	execOut(t, d, src.ID, "sh", "-c", "echo later > /home/user/f; echo s > /home/user/only-src")
	for id, want := range map[string]string{a: "from-a <absent>", b: "orig <absent>", c: "orig <absent>"} {
		if got := readFileIn(t, d, id, "/home/user/f") + " " + readFileIn(t, d, id, "/home/user/only-src"); got != want {
			t.Errorf("copy %s after the source's write: %q, want %q", id, got, want)
		}
	}
	// Another copy writes: neither the first copy nor the source sees it.
	execOut(t, d, b, "sh", "-c", "echo from-b > /home/user/f")
	for id, want := range map[string]string{src.ID: "later", a: "from-a", c: "orig"} {
		if got := readFileIn(t, d, id, "/home/user/f"); got != want {
			t.Errorf("%s after copy b's write: %q, want %q", id, got, want)
		}
	}
}
