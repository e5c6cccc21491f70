package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/memimage"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// A memory snapshot is a file snapshot plus a memory image of the same
// moment. The sandbox is hibernated (hibernate.go), which stops it with
// its files consistent with its memory; its writable layer is captured as
// for any snapshot; the sealed image is linked into the snapshot's own
// directory, <state>/memory-snapshots/<snapshot id>; and the sandbox is
// restored from its image and runs on. A sandbox created from the
// snapshot stacks its layers as any restore does and is restored from the
// image instead of booted, under its own id and hostname.

func (c *Controller) snapshotMemoryDir(id string) string {
	return filepath.Join(c.cfg.StateDir, "memory-snapshots", id)
}

// memorySnapshotLocked takes a memory snapshot of rec; the caller holds
// e.mu. If the snapshot is recorded but the sandbox does not come back,
// the error says so and the snapshot is kept.
func (c *Controller) memorySnapshotLocked(ctx context.Context, e *entry, rec *store.Sandbox, name string, ttl time.Duration, owner string) (*store.Snapshot, error) {
	if rec.State != api.StateRunning && rec.State != api.StatePaused {
		return nil, fmt.Errorf("sandbox %s is %s; memory snapshots are taken of running or paused sandboxes: %w", rec.ID, rec.State, errdefs.ErrConflict)
	}
	if _, err := c.snapStore(); err != nil {
		return nil, err
	}
	if _, err := c.checkpointer(rec); err != nil {
		return nil, err
	}
	if c.networkOf(rec.ID) != nil {
		return nil, fmt.Errorf("sandbox %s has egress networking, whose address lives in its memory: memory snapshots are taken of sandboxes with network none: %w", rec.ID, errdefs.ErrFailedPrecondition)
	}
	wasPaused := rec.State == api.StatePaused
	if err := c.hibernateLocked(ctx, e, rec, "memory snapshot"); err != nil {
		return nil, err
	}
	snap, serr := c.recordMemorySnapshot(ctx, rec, name, ttl, owner)
	werr := c.wakeLocked(ctx, e, rec, "memory snapshot taken")
	if werr == nil && wasPaused {
		if p, err := c.pauser(rec); err == nil && p.Pause(ctx, rec.ID) == nil {
			_ = c.setState(ctx, rec, api.StatePaused, "memory snapshot taken; paused again", false)
		}
	}
	switch {
	case serr != nil:
		return nil, serr
	case werr != nil:
		return nil, fmt.Errorf("memory snapshot %s taken, but sandbox %s did not come back from it: %w", snap.ID, rec.ID, werr)
	}
	return snap, nil
}

// recordMemorySnapshot captures a hibernated sandbox's files and links
// its memory image into a new snapshot.
func (c *Controller) recordMemorySnapshot(ctx context.Context, rec *store.Sandbox, name string, ttl time.Duration, owner string) (*store.Snapshot, error) {
	ctx = context.WithoutCancel(ctx)
	m, err := memimage.Read(c.memoryDir(rec.ID))
	if err != nil {
		return nil, err
	}
	chain, top, err := c.captureLayer(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer c.snaps.mu.Unlock()
	snap := c.newSnapshotRecord(rec, name, ttl, owner, chain, top)
	snap.Memory = &store.SnapshotMemory{Runtime: rec.Runtime, Format: m.Format, Bytes: m.Bytes(), Resources: rec.Resources}
	dst := c.snapshotMemoryDir(snap.ID)
	if err := linkImage(c.memoryDir(rec.ID), dst); err != nil {
		_ = os.RemoveAll(dst)
		return nil, snapErr(err)
	}
	if err := c.opts.Store.CreateSnapshot(ctx, snap); err != nil {
		_ = os.RemoveAll(dst)
		if errors.Is(err, errdefs.ErrConflict) && name != "" {
			return nil, errSnapshotNameTaken(name)
		}
		return nil, err
	}
	c.log.Info("memory snapshot taken", "sandbox", rec.ID, "snapshot", snap.ID, "layer", top.Digest, "memory_bytes", m.Bytes())
	return snap, nil
}

// linkImage puts a sealed image's files into dst (new) as hard links, or
// copies where the two are on different file systems. The files are never
// written again: restores only read them.
func linkImage(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, ent := range ents {
		if !ent.Type().IsRegular() {
			return fmt.Errorf("memory image: %s is not a regular file: %w", ent.Name(), memimage.ErrDamaged)
		}
		from, to := filepath.Join(src, ent.Name()), filepath.Join(dst, ent.Name())
		err := os.Link(from, to)
		if errors.Is(err, syscall.EXDEV) {
			err = copyRegular(from, to)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func copyRegular(from, to string) error {
	in, err := os.OpenFile(from, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// planMemoryRestore checks a create from a memory snapshot and fixes what
// the snapshot decides: the runtime and size it was taken at, no network.
func (c *Controller) planMemoryRestore(req *api.CreateSandboxRequest, snap *store.Snapshot) error {
	m := snap.Memory
	if req.Runtime != "" && req.Runtime != m.Runtime {
		return fmt.Errorf("snapshot %s keeps memory taken on runtime %s; it cannot be restored on %s: leave the runtime out: %w", snap.ID, m.Runtime, rules.Truncate(req.Runtime, 40), errdefs.ErrFailedPrecondition)
	}
	if (req.Size != "" || req.Resources != api.Resources{}) && (req.Size != "" || req.Resources != m.Resources) {
		return fmt.Errorf("snapshot %s keeps memory, which is restored at the size it was taken at (cpu %g, memory %d MiB, disk %d MiB): leave the size out: %w",
			snap.ID, m.Resources.CPU, m.Resources.MemoryMB, m.Resources.DiskMB, errdefs.ErrFailedPrecondition)
	}
	if req.Network != nil && req.Network.Mode != "" && req.Network.Mode != api.NetworkNone {
		return fmt.Errorf("snapshot %s keeps memory, which is restored with network none: %w", snap.ID, errdefs.ErrFailedPrecondition)
	}
	cp, err := c.checkpointer(&store.Sandbox{ID: "(new)", Runtime: m.Runtime})
	if err != nil {
		return err
	}
	if f := cp.CheckpointFormat(); f != m.Format {
		return fmt.Errorf("snapshot %s keeps memory made by %s and this daemon runs %s, which cannot restore it: %w", snap.ID, m.Format, f, errdefs.ErrFailedPrecondition)
	}
	req.Runtime, req.Size, req.Resources = m.Runtime, "", m.Resources
	return nil
}

// memoryRestore is the launch of a sandbox created from a memory
// snapshot: its image checked, then restored instead of booted. nil when
// rec is not made from one.
func (c *Controller) memoryRestore(ctx context.Context, rec *store.Sandbox, snap *store.Snapshot) (func(context.Context, runtime.Spec) (runtime.Info, error), error) {
	if snap == nil || snap.Memory == nil {
		return nil, nil
	}
	cp, err := c.checkpointer(rec)
	if err != nil {
		return nil, err
	}
	dir := c.snapshotMemoryDir(snap.ID)
	if _, err := c.checkMemoryImage(dir, cp.CheckpointFormat(), "snapshot", snap.ID); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", snap.ID, err)
	}
	return func(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
		return cp.Restore(ctx, spec, dir)
	}, nil
}

// checkMemoryImage is memimage.Check, timed in the daemon's log: a
// restore checks the whole image first, a step of its own in the time to
// first exec. A file the daemon hashed before (when it sealed the image,
// or at an earlier restore) and that has not changed since is not read
// again (memimage.Verified).
func (c *Controller) checkMemoryImage(dir, format, kind, id string) (memimage.Manifest, error) {
	began, reads := time.Now(), c.memOK.Reads()
	m, err := c.memOK.Check(dir, format)
	if err == nil {
		c.log.Debug("memory image checked", kind, id, "mib", m.Bytes()>>20, "files_read", c.memOK.Reads()-reads, "took", time.Since(began).Round(time.Millisecond))
	}
	return m, err
}

// holdMemory keeps snapshot id's memory image from the collector until
// release is called: a create holds it from its plan to the end of its
// restore, so deleting the snapshot meanwhile does not fail the create.
// The last release of an image whose snapshot was deleted removes it.
func (c *Controller) holdMemory(id string) (release func()) {
	c.snaps.mu.Lock()
	if c.snaps.memHeld == nil {
		c.snaps.memHeld = map[string]int{}
	}
	c.snaps.memHeld[id]++
	c.snaps.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.snaps.mu.Lock()
			defer c.snaps.mu.Unlock()
			if c.snaps.memHeld[id]--; c.snaps.memHeld[id] > 0 {
				return
			}
			delete(c.snaps.memHeld, id)
			if c.snaps.memOrphaned[id] {
				delete(c.snaps.memOrphaned, id)
				c.removeMemoryImage(id)
			}
		})
	}
}

// collectMemoryImages removes the memory images of snapshots that are
// gone; keep holds the ids of those recorded. An image a create is
// restoring from is left to its last release. The caller holds snaps.mu.
func (c *Controller) collectMemoryImages(keep map[string]bool) {
	ents, err := os.ReadDir(filepath.Join(c.cfg.StateDir, "memory-snapshots"))
	if err != nil {
		return
	}
	for _, ent := range ents {
		id := ent.Name()
		switch {
		case keep[id]:
		case c.snaps.memHeld[id] > 0:
			if c.snaps.memOrphaned == nil {
				c.snaps.memOrphaned = map[string]bool{}
			}
			c.snaps.memOrphaned[id] = true
		default:
			c.removeMemoryImage(id)
		}
	}
}

func (c *Controller) removeMemoryImage(id string) {
	if err := os.RemoveAll(c.snapshotMemoryDir(id)); err != nil {
		c.log.Warn("remove the memory image of a deleted snapshot", "snapshot", id, "err", err)
		return
	}
	c.log.Info("removed the memory image of a deleted snapshot", "snapshot", id)
}
