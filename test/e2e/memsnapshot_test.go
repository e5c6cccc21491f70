package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestMemorySnapshot: `snapshot create --memory` keeps a gVisor sandbox's
// memory and processes; the sandbox runs on; a sandbox created from the
// snapshot, and each copy of `fork --memory`, resumes the same counting
// process under its own id and hostname, independent of the others. What
// cannot be kept is refused by name, and deleting the snapshot removes
// its memory image.
func TestMemorySnapshot(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	src := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, KeepAlive: true})
	execOut(t, d, src.ID, "sh", "-c", counterLoop)
	before := readCount(t, d, src.ID)
	pid, _ := execOut(t, d, src.ID, "cat", "/home/user/loop.pid")
	pid = strings.TrimSpace(pid)

	began := time.Now()
	var snap api.Snapshot
	mustJSON(t, d.must("--json", "snapshot", "create", src.ID, "--memory", "--name", "warm"), &snap)
	t.Logf("memory snapshot took %v: %d bytes of memory, %d of files", time.Since(began), snap.MemorySize, snap.Size)
	if !snap.Memory || snap.MemorySize <= 0 {
		t.Fatalf("snapshot %+v does not say it keeps memory", snap)
	}
	if got, _ := d.client.Get(ctx, src.ID); got.State != api.StateRunning {
		t.Fatalf("the source is %s after its memory snapshot", got.State)
	}
	if _, code := execOut(t, d, src.ID, "kill", "-0", pid); code != 0 {
		t.Error("the source's counting process is gone after its memory snapshot")
	}
	if ls := d.must("snapshot", "ls"); !strings.Contains(ls, "MEMORY") {
		t.Errorf("snapshot ls shows no memory column:\n%s", ls)
	}

	began = time.Now()
	cp := create(t, d, api.CreateSandboxRequest{FromSnapshot: "warm", KeepAlive: true})
	t.Logf("create from the memory snapshot took %v", time.Since(began))
	if cp.Runtime != api.RuntimeGVisor || cp.Resources != src.Resources {
		t.Errorf("copy runs %s at %+v, the source %s at %+v", cp.Runtime, cp.Resources, src.Runtime, src.Resources)
	}
	if n := readCount(t, d, cp.ID); n < before {
		t.Errorf("count in the copy %d, before the snapshot %d: the loop started over", n, before)
	}
	if _, code := execOut(t, d, cp.ID, "kill", "-0", pid); code != 0 {
		t.Error("the counting process is not in the copy")
	}
	if host, _ := execOut(t, d, cp.ID, "hostname"); strings.TrimSpace(host) != cp.ID {
		t.Errorf("copy's hostname %q, want its own id %s", host, cp.ID)
	}
	execOut(t, d, cp.ID, "sh", "-c", "echo copy > /home/user/mine")
	if _, code := execOut(t, d, src.ID, "test", "-e", "/home/user/mine"); code == 0 {
		t.Error("a file written in the copy shows in the source")
	}

	// Live copies.
	var fork api.ForkResult
	mustJSON(t, d.must("--json", "fork", src.ID, "--memory", "--count", "3"), &fork)
	if len(fork.Sandboxes) != 3 || !fork.Snapshot.Memory {
		t.Fatalf("fork --memory: %+v", fork)
	}
	for _, sb := range fork.Sandboxes {
		if _, code := execOut(t, d, sb.ID, "kill", "-0", pid); code != 0 {
			t.Errorf("copy %s has no counting process", sb.ID)
		}
		if host, _ := execOut(t, d, sb.ID, "hostname"); strings.TrimSpace(host) != sb.ID {
			t.Errorf("copy %s has hostname %q", sb.ID, host)
		}
	}

	// Refusals.
	for _, tc := range []struct {
		req  api.CreateSandboxRequest
		want string
	}{
		{api.CreateSandboxRequest{FromSnapshot: "warm", Runtime: api.RuntimeRunc}, "runtime"},
		{api.CreateSandboxRequest{FromSnapshot: "warm", Resources: api.Resources{MemoryMB: 1024}}, "size"},
		{api.CreateSandboxRequest{FromSnapshot: "warm", Network: &api.NetworkPolicy{Mode: api.NetworkEgress, AllowHosts: []string{"example.com"}}}, "network none"},
	} {
		if _, err := d.client.Create(ctx, tc.req); !errors.Is(err, paddock.ErrFailedPrecondition) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("create %+v = %v; want a precondition failure naming %q", tc.req, err, tc.want)
		}
	}
	runc := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeRunc, KeepAlive: true})
	if _, err := d.client.CreateSnapshot(ctx, runc.ID, api.CreateSnapshotRequest{Memory: true}); !errors.Is(err, paddock.ErrFailedPrecondition) || !strings.Contains(err.Error(), "--runtime gvisor") {
		t.Errorf("memory snapshot of a runc sandbox = %v", err)
	}
	egress := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: api.RuntimeGVisor, KeepAlive: true,
		Network: &api.NetworkPolicy{Mode: api.NetworkEgress, AllowHosts: []string{"example.com"}}})
	if _, err := d.client.CreateSnapshot(ctx, egress.ID, api.CreateSnapshotRequest{Memory: true}); !errors.Is(err, paddock.ErrFailedPrecondition) || !strings.Contains(err.Error(), "egress") {
		t.Errorf("memory snapshot of an egress sandbox = %v", err)
	}

	// Deleting the snapshot removes its memory image; the copies run on.
	dir := filepath.Join(d.stateDir, "memory-snapshots", snap.ID)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("memory image of the snapshot: %v", err)
	}
	d.must("snapshot", "rm", "warm")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("memory image still there after snapshot rm: %v", err)
	}
	if n := readCount(t, d, cp.ID); n <= 0 {
		t.Error("the copy stopped counting when its snapshot went")
	}

	// A snapshot deleted while a sandbox is being restored from it: the
	// restore holds its memory image, finishes, and the image goes once
	// it is done. A delete that lands before the create has found the
	// snapshot fails that create with not found, never halfway.
	restored := 0
	for i, delay := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond} {
		var s api.Snapshot
		mustJSON(t, d.must("--json", "snapshot", "create", src.ID, "--memory"), &s)
		type result struct {
			sb  *api.Sandbox
			err error
		}
		done := make(chan result, 1)
		go func() {
			sb, err := d.client.Create(ctx, api.CreateSandboxRequest{FromSnapshot: s.ID, KeepAlive: true})
			done <- result{sb, err}
		}()
		time.Sleep(delay)
		d.must("snapshot", "rm", s.ID)
		r := <-done
		switch {
		case r.err == nil:
			restored++
			if _, code := execOut(t, d, r.sb.ID, "kill", "-0", pid); code != 0 {
				t.Errorf("delete after %v: the sandbox restored while its snapshot went has no counting process", delay)
			}
		case errors.Is(r.err, paddock.ErrNotFound):
			t.Logf("delete after %v landed before the create found the snapshot: %v", delay, r.err)
		default:
			t.Errorf("create %d, its snapshot deleted after %v: %v", i, delay, r.err)
		}
		if _, err := os.Stat(filepath.Join(d.stateDir, "memory-snapshots", s.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("delete after %v: memory image left once the restore was done: %v", delay, err)
		}
	}
	if restored == 0 {
		t.Error("no create finished while its snapshot was deleted: the race this checks never happened")
	}
}

// TestMemorySnapshotPython: what the issue promises a memory snapshot
// keeps, on the base image: a Python code context's variables and a dev
// server still listening, in a sandbox created from the snapshot.
func TestMemorySnapshotPython(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	src := create(t, d, api.CreateSandboxRequest{Image: "base", Runtime: api.RuntimeGVisor, KeepAlive: true})
	res, err := d.client.RunCode(ctx, src.ID, "py", "import math\nanswer = 6 * 7\nbig = list(range(1000000))", paddock.RunCodeOptions{Create: true, Language: "python"})
	if err != nil || res.Status != api.RunOK {
		t.Fatalf("run code: %+v %v", res, err)
	}
	execOut(t, d, src.ID, "sh", "-c", "cd /home/user && echo served > index.html && nohup python3 -m http.server 8000 </dev/null >/dev/null 2>&1 &")
	waitServed(t, d, src.ID)

	var snap api.Snapshot
	mustJSON(t, d.must("--json", "snapshot", "create", src.ID, "--memory"), &snap)
	t.Logf("memory snapshot of a base sandbox with Python: %d bytes of memory", snap.MemorySize)
	began := time.Now()
	cp := create(t, d, api.CreateSandboxRequest{FromSnapshot: snap.ID, KeepAlive: true})
	res, err = d.client.RunCode(ctx, cp.ID, "py", "answer + len(big) - 1000000", paddock.RunCodeOptions{})
	t.Logf("create from the snapshot to a code result: %v", time.Since(began))
	if err != nil || res.Status != api.RunOK {
		t.Fatalf("run code in the copy: %+v %v", res, err)
	}
	if m, ok := res.Main(); !ok || m.Text() != "42" {
		t.Errorf("the copy's context says %+v, want 42 from the variables set before the snapshot", res.Results)
	}
	waitServed(t, d, cp.ID)
}

// waitServed checks the server on port 8000 answers inside the sandbox.
func waitServed(t *testing.T, d *daemon, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := execOut(t, d, id, "python3", "-c", "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8000/index.html', timeout=5).read().decode())")
		if code == 0 && strings.TrimSpace(out) == "served" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server on port 8000 in %s: %q (exit %d)", id, out, code)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
