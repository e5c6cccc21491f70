package runtimetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// testCheckpoint: a backend that can checkpoint saves a running sandbox
// (a counting background loop, a shell variable, a file) and restores it:
// the same process carries on counting from where it was, with its
// memory. One that cannot says so by name, as a precondition failure.
func (s *suite) testCheckpoint(t *testing.T) {
	b := s.newBackend(t)
	cp, ok := b.(runtime.Checkpointer)
	if !ok {
		t.Logf("%T keeps no memory on disk", b)
		return
	}
	ctx := ctxFor(t, 3*time.Minute)
	id := NewID(t)
	spec := s.spec(id)
	if err := cp.CanCheckpoint(); err != nil {
		if !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("CanCheckpoint = %v, want a precondition failure", err)
		}
		if cp.CheckpointFormat() != "" {
			t.Errorf("CheckpointFormat = %q from a backend that cannot checkpoint", cp.CheckpointFormat())
		}
		s.start(ctx, t, b, spec)
		if err := cp.Checkpoint(ctx, id, t.TempDir()); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("Checkpoint = %v, want a precondition failure", err)
		}
		wantStatus(ctx, t, b, id, runtime.StatusRunning)
		t.Logf("cannot checkpoint: %v", err)
		return
	}
	if cp.CheckpointFormat() == "" {
		t.Error("CheckpointFormat is empty")
	}
	info := s.start(ctx, t, b, spec)
	ex := newExecer(t, info.AgentSocket)
	// The loop keeps a number in memory (the shell's variable) and shows
	// it in a file; after the restore it must go on from there.
	ex.ok(ctx, t, "root", "sh", "-c", `sh -c 'secret=kept-in-memory; i=0; echo $$ > /tmp/loop.pid; while :; do i=$((i+1)); echo "$i $secret" > /tmp/count.tmp; mv /tmp/count.tmp /tmp/count; sleep 0.05; done' </dev/null >/dev/null 2>&1 &`)
	ex.ok(ctx, t, "root", "sh", "-c", "echo on-disk > /home/user/file")
	count := func() int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, _ := ex.run(ctx, "root", "cat", "/tmp/count")
			f := strings.Fields(out.stdout)
			if len(f) == 2 && f[1] == "kept-in-memory" {
				n, err := strconv.Atoi(f[0])
				if err == nil && n > 0 {
					return n
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no count from the loop: %s", out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := count()
	pid := strings.TrimSpace(ex.ok(ctx, t, "root", "cat", "/tmp/loop.pid"))

	dir := t.TempDir()
	began := time.Now()
	if err := cp.Checkpoint(ctx, id, dir); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	t.Logf("checkpoint took %v", time.Since(began))
	wantStatus(ctx, t, b, id, runtime.StatusStopped)
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		t.Fatalf("checkpoint dir holds %d files (%v)", len(ents), err)
	}

	began = time.Now()
	info, err := cp.Restore(ctx, spec, dir)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Logf("restore took %v", time.Since(began))
	wantStatus(ctx, t, b, id, runtime.StatusRunning)
	s.waitHealthy(ctx, t, info.AgentSocket)
	ex = newExecer(t, info.AgentSocket)
	after := count()
	if after < before {
		t.Errorf("count after the restore %d, before the checkpoint %d: the loop started over", after, before)
	}
	time.Sleep(300 * time.Millisecond)
	if later := count(); later <= after {
		t.Errorf("count stays at %d after the restore: the loop does not run", later)
	}
	ex.ok(ctx, t, "root", "kill", "-0", pid) // the same process, not a new one
	if out := strings.TrimSpace(ex.ok(ctx, t, "root", "cat", "/home/user/file")); out != "on-disk" {
		t.Errorf("file reads %q after the restore", out)
	}

	// A second sandbox restored from the same checkpoint, on a copy of
	// the first one's files as a read-only layer (what a memory snapshot
	// is): the same processes, with their memory, under a new id.
	if ls, ok := b.(runtime.LayerSnapshotter); ok {
		s.testRestoreElsewhere(ctx, t, b, cp, ls, id, dir, before)
	}

	// A checkpoint that is not there restores nothing and leaves the
	// sandbox stopped, never half running.
	if err := b.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := cp.Restore(ctx, spec, t.TempDir()); err == nil {
		t.Error("Restore from an empty directory succeeded")
	}
	wantStatus(ctx, t, b, id, runtime.StatusStopped)
}

// testRestoreElsewhere checkpoints id again, copies its writable layer,
// and restores a new sandbox from both.
func (s *suite) testRestoreElsewhere(ctx context.Context, t *testing.T, b runtime.Backend, cp runtime.Checkpointer, ls runtime.LayerSnapshotter, id, _ string, before int) {
	dir := t.TempDir()
	if err := cp.Checkpoint(ctx, id, dir); err != nil {
		t.Fatalf("second Checkpoint: %v", err)
	}
	layer := filepath.Join(t.TempDir(), "layer")
	if err := os.Mkdir(layer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ls.SnapshotLayer(ctx, id, layer); err != nil {
		t.Fatalf("SnapshotLayer: %v", err)
	}
	copyID := NewID(t)
	spec := s.spec(copyID)
	spec.Layers = append(slices.Clone(spec.Layers), layer)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Destroy(ctx, copyID)
	})
	began := time.Now()
	info, err := cp.Restore(ctx, spec, dir)
	if err != nil {
		t.Fatalf("Restore into a new sandbox: %v", err)
	}
	t.Logf("restore into a new sandbox took %v", time.Since(began))
	s.waitHealthy(ctx, t, info.AgentSocket)
	ex := newExecer(t, info.AgentSocket)
	out := ex.ok(ctx, t, "root", "cat", "/tmp/count")
	f := strings.Fields(out)
	if len(f) != 2 || f[1] != "kept-in-memory" {
		t.Fatalf("count in the copy reads %q", out)
	}
	if n, _ := strconv.Atoi(f[0]); n < before {
		t.Errorf("count in the copy %d, before the first checkpoint %d", n, before)
	}
	if out := strings.TrimSpace(ex.ok(ctx, t, "root", "cat", "/home/user/file")); out != "on-disk" {
		t.Errorf("file in the copy reads %q", out)
	}
	t.Logf("hostname in the copy %s of %s: %s", copyID, id, strings.TrimSpace(ex.ok(ctx, t, "root", "hostname")))
	// The original comes back from its own checkpoint too.
	if _, err := cp.Restore(ctx, s.spec(id), dir); err != nil {
		t.Fatalf("Restore of the original beside its copy: %v", err)
	}
}
