package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/memimage"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// counterLoop counts in a shell variable (memory) and shows the count in
// ~/count; its pid is in ~/loop.pid. (Not /tmp: gVisor gives /tmp a
// tmpfs of its own, which a stop does not keep.)
const counterLoop = `cd /home/user && sh -c 'i=0; echo $$ > loop.pid; while :; do i=$((i+1)); echo $i > count.new; mv count.new count; sleep 0.05; done' </dev/null >/dev/null 2>&1 &`

// readCount reads the loop's count, waiting for the first.
func readCount(t *testing.T, d *daemon, id string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := execOut(t, d, id, "cat", "/home/user/count")
		if n, err := strconv.Atoi(strings.TrimSpace(out)); code == 0 && err == nil && n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("no count in sandbox %s: %q (exit %d)", id, out, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostProcsOf counts the host processes whose command line names id
// (gVisor's sentry and gofer name the sandbox's bundle).
func hostProcsOf(t *testing.T, id string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), id) {
			n++
		}
	}
	return n
}

// TestHibernate: a gVisor sandbox hibernated with `pause --to-disk` leaves
// no process on the host, survives a daemon kill -9 hibernated, and the
// next request restores it where it was: the same counting process goes
// on from its count, a background process started through the API is
// still followed, and the history and ledger say what happened.
func TestHibernate(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, KeepAlive: true})
	execOut(t, d, sb.ID, "sh", "-c", counterLoop)
	proc, err := d.client.StartProcess(ctxT(t, time.Minute), sb.ID, api.StartProcessRequest{Cmd: []string{"sh", "-c", "sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	before := readCount(t, d, sb.ID)
	pid, _ := execOut(t, d, sb.ID, "cat", "/home/user/loop.pid")
	pid = strings.TrimSpace(pid)
	if hostProcsOf(t, sb.ID) == 0 {
		t.Fatal("no host process names the running sandbox: the check below would prove nothing")
	}

	began := time.Now()
	d.must("pause", "--to-disk", sb.ID)
	t.Logf("hibernate took %v", time.Since(began))
	got, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
	if err != nil || got.State != api.StateHibernated {
		t.Fatalf("after pause --to-disk: %+v, %v; want hibernated", got, err)
	}
	if n := hostProcsOf(t, sb.ID); n != 0 {
		t.Errorf("%d host processes of the hibernated sandbox remain: its memory is still on the host", n)
	}
	m, err := memimage.Check(filepath.Join(d.stateDir, "memory", sb.ID), "runsc "+runscVersion(t))
	if err != nil {
		t.Fatalf("memory image: %v", err)
	}
	t.Logf("memory image: %d bytes in %d files", m.Bytes(), len(m.Files))

	// Memory kept across a daemon crash.
	d.kill9()
	d.start()
	if got, err := d.client.Get(ctxT(t, time.Minute), sb.ID); err != nil || got.State != api.StateHibernated {
		t.Fatalf("after a daemon kill -9: %+v, %v; want hibernated", got, err)
	}

	began = time.Now()
	after := readCount(t, d, sb.ID) // the request restores it
	t.Logf("restore to first exec took %v", time.Since(began))
	if after < before {
		t.Errorf("count %d after the restore, %d before: the loop started over", after, before)
	}
	if _, code := execOut(t, d, sb.ID, "kill", "-0", pid); code != 0 {
		t.Errorf("the counting process %s is gone after the restore", pid)
	}
	time.Sleep(300 * time.Millisecond)
	if later := readCount(t, d, sb.ID); later <= after {
		t.Errorf("count stays at %d: the restored loop does not run", later)
	}
	if _, err := os.Stat(filepath.Join(d.stateDir, "memory", sb.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the memory image is still there after the restore: %v", err)
	}
	procs, err := d.client.ListProcesses(ctxT(t, time.Minute), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs {
		if p.ID == proc.ID {
			found = true
			if p.Status != api.ProcessRunning {
				t.Errorf("background process after the restore: %+v", p)
			}
		}
	}
	if !found {
		t.Errorf("background process %s not listed after the restore", proc.ID)
	}

	h, err := d.client.History(ctxT(t, time.Minute), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, c := range h.Changes {
		path = append(path, c.To)
	}
	if want := "running hibernating hibernated running"; !strings.Contains(strings.Join(path, " "), want) {
		t.Errorf("history %v does not show %q", path, want)
	}
	led, err := d.client.Ledger(ctxT(t, time.Minute), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range led.Entries {
		kinds[e.Kind]++
	}
	if kinds[api.LedgerHibernate] != 1 || kinds[api.LedgerResume] != 1 || kinds[api.LedgerProcessEnd] != 0 {
		t.Errorf("ledger kinds %v: want one hibernate, one resume and no process end", kinds)
	}
}

// runscVersion is the version of the runsc the daemon runs.
func runscVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(runscBin(), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	return f[len(f)-1]
}

// TestHibernateRefusals: what cannot be kept is said. A runc sandbox is
// refused naming --runtime gvisor; a memory image made by another runsc
// build is refused naming both and kept; a damaged one is never restored
// (the sandbox is in error, and a start boots it from its files); on_idle
// hibernate on runc is refused at create.
func TestHibernateRefusals(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)

	runc := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeRunc, KeepAlive: true})
	_, errOut, code := d.run("pause", "--to-disk", runc.ID)
	if code == 0 || !strings.Contains(errOut, "--runtime gvisor") {
		t.Errorf("pause --to-disk of a runc sandbox: exit %d, %q; want a refusal naming --runtime gvisor", code, errOut)
	}
	if got, _ := d.client.Get(ctx, runc.ID); got.State != api.StateRunning {
		t.Errorf("the refused runc sandbox is %s", got.State)
	}
	if _, err := d.client.Create(ctx, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeRunc, OnIdle: api.OnIdleHibernate}); !errors.Is(err, paddock.ErrFailedPrecondition) {
		t.Errorf("create runc with on_idle hibernate = %v, want a precondition failure", err)
	}

	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, KeepAlive: true})
	execOut(t, d, sb.ID, "sh", "-c", counterLoop)
	readCount(t, d, sb.ID)
	dir := filepath.Join(d.stateDir, "memory", sb.ID)
	manifest := filepath.Join(dir, memimage.ManifestName)

	// Another runsc build: refused, both named, the image kept.
	if _, err := d.client.Hibernate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m memimage.Manifest
	if err := json.Unmarshal(orig, &m); err != nil {
		t.Fatal(err)
	}
	realFormat := m.Format
	m.Format = "runsc v0.0.0-19990101000000-000000000000"
	b, _ := json.Marshal(m)
	if err := os.WriteFile(manifest, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = d.client.Resume(ctx, sb.ID)
	if !errors.Is(err, paddock.ErrFailedPrecondition) || !strings.Contains(err.Error(), m.Format) || !strings.Contains(err.Error(), realFormat) {
		t.Errorf("resume from another build's image = %v; want a precondition failure naming %q and %q", err, m.Format, realFormat)
	}
	if got, _ := d.client.Get(ctx, sb.ID); got.State != api.StateHibernated {
		t.Errorf("after the refusal the sandbox is %s, want hibernated", got.State)
	}
	if err := os.WriteFile(manifest, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Resume(ctx, sb.ID); err != nil {
		t.Fatalf("resume with the image put back: %v", err)
	}
	readCount(t, d, sb.ID)
	pid, _ := execOut(t, d, sb.ID, "cat", "/home/user/loop.pid")

	// A damaged image: never restored.
	if _, err := d.client.Hibernate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	pages := filepath.Join(dir, "pages.img")
	f, err := os.OpenFile(pages, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{0})
	f.Close()
	out, errOut, code := d.run("exec", sb.ID, "--", "true")
	if code == 0 || !strings.Contains(errOut, "memory image") {
		t.Fatalf("exec in a sandbox whose memory image is damaged: exit %d, %q %q; want a refusal naming the memory image", code, out, errOut)
	}
	got, err := d.client.Get(ctx, sb.ID)
	if err != nil || got.State != api.StateError || !strings.Contains(got.ErrorReason, "memory image") {
		t.Fatalf("after a damaged image: %+v, %v; want error naming the memory image", got, err)
	}
	if n := hostProcsOf(t, sb.ID); n != 0 {
		t.Errorf("%d host processes of a sandbox that was refused a restore", n)
	}
	if _, err := d.client.Start(ctx, sb.ID); err != nil {
		t.Fatalf("start after a damaged image: %v", err)
	}
	// By its command line, not its pid alone: a fresh boot can give
	// the same small pid to another process.
	if cmd, code := execOut(t, d, sb.ID, "cat", "/proc/"+strings.TrimSpace(pid)+"/cmdline"); code == 0 && strings.Contains(cmd, "count.new") {
		t.Error("the counting process runs after a boot from files: it was restored from a damaged image")
	}
	if out, _ := execOut(t, d, sb.ID, "cat", "/home/user/count"); strings.TrimSpace(out) == "" {
		t.Error("the files were not kept by the boot after a damaged image")
	}
}

// TestHibernateOnIdle: on_idle hibernate hibernates an idle gVisor
// sandbox, and the next request restores it.
func TestHibernateOnIdle(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, SleepAfter: "2s", OnIdle: api.OnIdleHibernate})
	execOut(t, d, sb.ID, "sh", "-c", counterLoop)
	before := readCount(t, d, sb.ID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == api.StateHibernated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s 30 s after going idle", got.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if after := readCount(t, d, sb.ID); after < before {
		t.Errorf("count %d after the idle hibernation, %d before", after, before)
	}
}

// TestHibernateDaemonKilled: a daemon killed with SIGKILL at some point
// of a hibernation leaves, after its restart, a sandbox that either runs
// on with its processes or is hibernated and restores with them, or, if
// the memory image was not finished, is stopped with its files: never a
// half-restored one, and exec works in every case.
func TestHibernateDaemonKilled(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	for i, delay := range []time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond} {
		sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, KeepAlive: true})
		execOut(t, d, sb.ID, "sh", "-c", counterLoop)
		readCount(t, d, sb.ID)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _, _ = d.run("pause", "--to-disk", sb.ID)
		}()
		time.Sleep(delay)
		d.kill9()
		<-done
		d.start()
		got, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %d after %v: %s (%s)", i, delay, got.State, got.ErrorReason)
		switch got.State {
		case api.StateRunning, api.StateHibernated, api.StateStopped:
		default:
			t.Errorf("kill %d: sandbox %s after the restart", i, got.State)
		}
		if out, code := execOut(t, d, sb.ID, "cat", "/home/user/count"); code != 0 || strings.TrimSpace(out) == "" {
			t.Errorf("kill %d: exec after the restart: %q exit %d", i, out, code)
		}
		if err := d.client.Delete(ctxT(t, time.Minute), sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(d.stateDir, "memory", sb.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kill %d: memory image left after destroy: %v", i, err)
		}
	}
}

// TestE2BPauseHibernates: through the E2B API, pause of a gVisor sandbox
// (the daemon's default runtime here) hibernates it, E2B shows it paused,
// and connect restores it with its processes.
func TestE2BPauseHibernates(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{listen: true, env: []string{"PADDOCK_DEFAULT_RUNTIME=gvisor"}})
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "e2b-hibernate"))
	c := &e2bClient{t: t, base: "http://" + d.listen, key: key}
	sb := c.create(map[string]any{"templateID": "busybox", "timeout": 300})
	execOut(t, d, sb.SandboxID, "sh", "-c", counterLoop)
	before := readCount(t, d, sb.SandboxID)
	if r := c.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", map[string]any{}, nil); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	got, err := d.client.Get(ctxT(t, time.Minute), sb.SandboxID)
	if err != nil || got.State != api.StateHibernated || got.Runtime != api.RuntimeGVisor {
		t.Fatalf("after E2B pause: %+v, %v; want a hibernated gvisor sandbox", got, err)
	}
	if n := hostProcsOf(t, sb.SandboxID); n != 0 {
		t.Errorf("%d host processes of the paused sandbox", n)
	}
	var info e2bSandbox
	c.do("GET", "/sandboxes/"+sb.SandboxID, nil, nil).json(t, &info)
	if info.State != "paused" {
		t.Errorf("E2B state %q, want paused", info.State)
	}
	if r := c.do("POST", "/sandboxes/"+sb.SandboxID+"/connect", map[string]any{"timeout": 300}, nil); r.status != http.StatusCreated {
		t.Fatalf("connect: %d %s", r.status, r.body)
	}
	if after := readCount(t, d, sb.SandboxID); after < before {
		t.Errorf("count %d after connect, %d before pause: memory not kept", after, before)
	}
	pid, _ := execOut(t, d, sb.SandboxID, "cat", "/home/user/loop.pid")
	pid = strings.TrimSpace(pid)

	// E2B's snapshots and forks of it keep memory too.
	r := c.do("POST", "/sandboxes/"+sb.SandboxID+"/snapshots", map[string]any{}, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", r.status, r.body)
	}
	var snap struct {
		SnapshotID string `json:"snapshotID"`
	}
	r.json(t, &snap)
	fromSnap := c.create(map[string]any{"templateID": snap.SnapshotID, "timeout": 300})
	r = c.do("POST", "/sandboxes/"+sb.SandboxID+"/fork", map[string]any{"count": 1}, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	var forked []struct {
		Sandbox *e2bSandbox `json:"sandbox"`
	}
	r.json(t, &forked)
	if len(forked) != 1 || forked[0].Sandbox == nil {
		t.Fatalf("fork answered %s", r.body)
	}
	for _, id := range []string{fromSnap.SandboxID, forked[0].Sandbox.SandboxID} {
		if _, code := execOut(t, d, id, "kill", "-0", pid); code != 0 {
			t.Errorf("%s (from an E2B snapshot or fork) has no counting process", id)
		}
	}
}

// TestE2BAutoPauseHibernates: an E2B sandbox created with autoPause on
// gVisor hibernates when its timeout comes (memory kept, as E2B's
// auto-pause keeps it) and connect restores its processes; one created
// with autoPauseMemory false stops (files kept) instead.
func TestE2BAutoPauseHibernates(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{listen: true, env: []string{"PADDOCK_DEFAULT_RUNTIME=gvisor"}})
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "e2b-autopause"))
	c := &e2bClient{t: t, base: "http://" + d.listen, key: key}
	withMemory := c.create(map[string]any{"templateID": "busybox", "timeout": 2, "autoPause": true})
	filesOnly := c.create(map[string]any{"templateID": "busybox", "timeout": 2, "autoPause": true, "autoPauseMemory": false})
	got, err := d.client.Get(ctxT(t, time.Minute), withMemory.SandboxID)
	if err != nil || got.OnIdle != api.OnIdleHibernate {
		t.Fatalf("auto-pausing gVisor sandbox: on_idle %q, %v; want %s", got.OnIdle, err, api.OnIdleHibernate)
	}
	execOut(t, d, withMemory.SandboxID, "sh", "-c", counterLoop)
	before := readCount(t, d, withMemory.SandboxID)
	waitState(t, d, withMemory.SandboxID, api.StateHibernated) // snapshot_test.go
	waitState(t, d, filesOnly.SandboxID, api.StateStopped)
	var info e2bSandbox
	c.do("GET", "/sandboxes/"+withMemory.SandboxID, nil, nil).json(t, &info)
	if info.State != "paused" {
		t.Errorf("E2B state %q of the hibernated sandbox, want paused", info.State)
	}
	if r := c.do("POST", "/sandboxes/"+withMemory.SandboxID+"/connect", map[string]any{"timeout": 300}, nil); r.status != http.StatusCreated {
		t.Fatalf("connect: %d %s", r.status, r.body)
	}
	if after := readCount(t, d, withMemory.SandboxID); after < before {
		t.Errorf("count %d after connect, %d before the auto-pause: memory not kept", after, before)
	}
}

// TestHibernateDiskFull: a disk that fills up while a checkpoint writes.
// Memory images live on a 640 MiB ext4 disk; two sandboxes with 512 MiB
// limits each hold 350 MiB (in /dev/shm and /tmp, both memory in gVisor).
// The first hibernates: it passes the up-front check (576 MiB free is
// enough for it), and as soon as its image directory appears the test
// takes all but 32 MiB of the disk, so its checkpoint runs out of space
// while it writes. That one fails with the reason, keeps no part of its
// image and leaves its sandbox usable (running on with its processes, or
// stopped with its files if gVisor did not survive the failed save). With
// the room given back, the second hibernates and wakes. (Two hibernating
// at once left it to the scheduler whether one ran out of space while
// writing or was refused up front after the other had begun.)
func TestHibernateDiskFull(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	dir := filepath.Join(d.stateDir, "memory")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A disk, not a tmpfs: what the sentry writes into a tmpfs is
	// charged to the sandbox's own memory limit.
	disk := filepath.Join(t.TempDir(), "memory.ext4")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", disk, "640M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", disk, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a small disk for memory images: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	var ids []string
	before := map[string]int{}
	for range 2 {
		sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, KeepAlive: true,
			Resources: api.Resources{MemoryMB: 512}})
		execOut(t, d, sb.ID, "sh", "-c", counterLoop)
		if out, code := execOut(t, d, sb.ID, "sh", "-c", "head -c 50000000 /dev/urandom > /dev/shm/fill && head -c 317000000 /dev/urandom > /tmp/fill"); code != 0 {
			t.Fatalf("fill the sandbox's memory: %d %s", code, out)
		}
		ids = append(ids, sb.ID)
		before[sb.ID] = readCount(t, d, sb.ID)
	}

	first, second := ids[0], ids[1]
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, code := d.run("pause", "--to-disk", first)
		done <- result{strings.TrimSpace(errOut), code}
	}()
	// The image directory is made after the up-front check, before
	// runsc starts writing: the disk fills from there.
	filler := filepath.Join(dir, "filler")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, first)); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the hibernate ended before its image directory was seen: exit %d: %s", r.code, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no image directory within a minute")
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * st.Bsize; free > 32<<20 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, free-32<<20); err != nil {
			t.Fatalf("fill the memory images' disk: %v", err)
		}
	}
	f.Close()
	r := <-done
	if r.code == 0 || !strings.Contains(r.errOut, "filled up") {
		t.Fatalf("hibernate onto a disk that filled up: exit %d: %s", r.code, r.errOut)
	}
	t.Logf("sandbox %s: %s", first, r.errOut)
	if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Errorf("the failed hibernate of %s left its image directory (%v)", first, err)
	}
	got, err := d.client.Get(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	switch got.State {
	case api.StateRunning:
		if n := readCount(t, d, first); n < before[first] {
			t.Errorf("count %d after the failed hibernate, %d before", n, before[first])
		}
	case api.StateStopped:
		t.Logf("sandbox %s was stopped, its files kept", first)
		d.must("start", first)
		if out, code := execOut(t, d, first, "cat", "/home/user/count"); code != 0 || strings.TrimSpace(out) == "" {
			t.Errorf("the stopped sandbox lost its files: exit %d, %q", code, out)
		}
	default:
		t.Fatalf("sandbox is %s after a failed hibernate (%s)", got.State, got.ErrorReason)
	}
	if out, code := execOut(t, d, first, "echo", "ok"); code != 0 || out != "ok\n" {
		t.Errorf("sandbox unusable after the failed hibernate: %d %q", code, out)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d.must("pause", "--to-disk", second)
	if out, code := execOut(t, d, second, "echo", "ok"); code != 0 || out != "ok\n" {
		t.Errorf("the hibernated sandbox did not wake: %d %q", code, out)
	}
	if n := readCount(t, d, second); n < before[second] {
		t.Errorf("count %d after waking, %d before: memory not kept", n, before[second])
	}
}
