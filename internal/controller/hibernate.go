package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/memimage"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// Hibernation keeps a sandbox's memory and processes on disk: the runtime
// checkpoints it (gVisor), the image is sealed under <state>/memory/<id>
// (internal/memimage), and no compute is left on the host. The next
// request, resume or start restores it where it was, after checking the
// image; the image is removed once the sandbox runs again (its files move
// on from there), when it is stopped (memory dropped, files kept) or
// destroyed.

// checkpointTimeout bounds one checkpoint or restore, which write or read
// the sandbox's whole memory.
const checkpointTimeout = 10 * time.Minute

// memoryHeadroom is free disk kept beyond a memory image's worst size.
const memoryHeadroom = 64 << 20

func (c *Controller) memoryDir(id string) string {
	return filepath.Join(c.cfg.StateDir, "memory", id)
}

// checkpointer is rec's backend as a Checkpointer that can checkpoint,
// or the reason it cannot.
func (c *Controller) checkpointer(rec *store.Sandbox) (runtime.Checkpointer, error) {
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return nil, err
	}
	cp, ok := b.(runtime.Checkpointer)
	if !ok {
		return nil, fmt.Errorf("%s cannot keep a sandbox's memory on disk: %w", c.runtimeDesc(rec.Runtime), errdefs.ErrFailedPrecondition)
	}
	if err := cp.CanCheckpoint(); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", rec.ID, err)
	}
	return cp, nil
}

// Hibernate writes a running or paused sandbox's memory and processes to
// disk and frees its compute. Hibernating a hibernated sandbox is a no-op.
func (c *Controller) Hibernate(ctx context.Context, ref string) (*api.Sandbox, error) {
	rec, e, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.hibernateLocked(ctx, e, rec, "hibernate requested"); err != nil {
		return nil, err
	}
	return c.toAPI(rec), nil
}

// hibernateLocked hibernates rec; the caller holds e.mu.
func (c *Controller) hibernateLocked(ctx context.Context, e *entry, rec *store.Sandbox, reason string) error {
	if rec.State == api.StateHibernated {
		return nil
	}
	if err := checkTransition(rec.ID, rec.State, api.StateHibernating); err != nil {
		return err
	}
	cp, err := c.checkpointer(rec)
	if err != nil {
		return err
	}
	if err := c.checkMemoryDisk(rec); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	if rec.State == api.StatePaused {
		// gVisor checkpoints a running sandbox; a frozen one is thawed
		// for the moment it takes.
		p, err := c.pauser(rec)
		if err != nil {
			return err
		}
		if err := p.Resume(ctx, rec.ID); err != nil {
			return fmt.Errorf("thaw sandbox %s to hibernate it: %w", rec.ID, err)
		}
	}
	dir := c.memoryDir(rec.ID)
	if err := freshDir(dir); err != nil {
		return err
	}
	rec.LastActivityAt = time.Unix(0, e.activity.Load()).UTC()
	if err := c.setState(ctx, rec, api.StateHibernating, reason, false); err != nil {
		return err
	}
	if e.agent != nil {
		e.agent.Close()
		e.hibernated, e.agent = e.agent, nil
	}
	began := time.Now()
	if err := cp.Checkpoint(ctx, rec.ID, dir); err != nil {
		_ = os.RemoveAll(dir)
		// The backend puts a sandbox whose checkpoint failed back as it
		// was; one that does not answer any more is stopped.
		if aerr := c.adopt(ctx, e, rec); aerr == nil {
			c.carryProcesses(e)
			_ = c.setState(ctx, rec, api.StateRunning, "hibernate failed, running on: "+err.Error(), false)
			return fmt.Errorf("hibernate sandbox %s: %w", rec.ID, err)
		}
		// gVisor's sentry can end with a failed save (it panics when
		// its image cannot be written): the sandbox's files are all
		// that is left of it.
		if c.stopAfterHibernateFailure(ctx, rec, "hibernate failed: "+err.Error()) {
			return fmt.Errorf("hibernate sandbox %s: %w; the sandbox did not survive it and is stopped, its files kept, its processes lost", rec.ID, err)
		}
		return fmt.Errorf("hibernate sandbox %s: %w", rec.ID, err)
	}
	m, err := c.memOK.Seal(dir, cp.CheckpointFormat(), c.now())
	if err != nil {
		_ = os.RemoveAll(dir)
		_ = c.setState(ctx, rec, api.StateStopped, "hibernate could not keep the memory image ("+err.Error()+"); files kept, memory lost", false)
		return fmt.Errorf("hibernate sandbox %s: %w", rec.ID, err)
	}
	return c.setState(ctx, rec, api.StateHibernated, fmt.Sprintf("%s; memory and processes on disk (%s in %s)",
		reason, mib(m.Bytes()>>20), time.Since(began).Round(time.Millisecond)), false)
}

// hibernateIdle hibernates an idle sandbox (on_idle hibernate). One that
// cannot hibernate for want of disk is stopped instead, its files kept.
func (c *Controller) hibernateIdle(ctx context.Context, id, reason string) error {
	rec, e, unlock, err := c.lockRecord(ctx, id)
	if err != nil {
		return err
	}
	if rec.State != api.StateRunning || e.active.Load() > 0 {
		unlock()
		return nil // changed meanwhile: not idle any more
	}
	err = c.hibernateLocked(ctx, e, rec, reason)
	unlock()
	if errors.Is(err, errdefs.ErrResourceExhausted) {
		_, err = c.stop(ctx, id, reason+"; no disk for its memory image, stopped instead (files kept)")
	}
	return err
}

// stopAfterFailure stops a sandbox whose compute is in an unknown state
// after a failed step and records it in error with the reason.
func (c *Controller) stopAfterFailure(ctx context.Context, rec *store.Sandbox, reason string) {
	if b, err := c.backend(rec.Runtime); err == nil {
		if serr := b.Stop(ctx, rec.ID); serr != nil {
			c.log.Warn("stop after a failure", "sandbox", rec.ID, "err", serr)
		}
	}
	_ = c.setState(ctx, rec, api.StateError, reason+"; stopped, files kept", true)
}

// stopAfterHibernateFailure stops a sandbox that did not survive a failed
// checkpoint. Stopped, it is recorded stopped (a start boots it from its
// files) and it reports true; otherwise it is in error.
func (c *Controller) stopAfterHibernateFailure(ctx context.Context, rec *store.Sandbox, reason string) bool {
	b, err := c.backend(rec.Runtime)
	if err == nil {
		err = b.Stop(ctx, rec.ID)
	}
	if err != nil {
		c.log.Warn("stop after a failed hibernate", "sandbox", rec.ID, "err", err)
		_ = c.setState(ctx, rec, api.StateError, reason+"; could not be stopped: "+err.Error(), true)
		return false
	}
	_ = c.setState(ctx, rec, api.StateStopped, reason+"; the sandbox did not survive it: stopped, files kept, processes lost", true)
	return true
}

// checkMemoryDisk refuses a hibernation the state dir's file system has
// no room for: the image holds at most the sandbox's memory limit.
func (c *Controller) checkMemoryDisk(rec *store.Sandbox) error {
	// Memory images have a directory of their own, which may be a file
	// system of its own: measure that one.
	root := filepath.Dir(c.memoryDir(rec.ID))
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	free, err := freeBytes(root)
	if err != nil {
		return nil // measured by checkDisk's rules: not a reason to refuse
	}
	need := uint64(rec.Resources.MemoryMB)<<20 + memoryHeadroom
	if free >= need {
		return nil
	}
	return fmt.Errorf("sandbox %s cannot hibernate: its memory image may take up to %s and the file system for memory images has %s free: %w",
		rec.ID, mib(rec.Resources.MemoryMB), mib(int64(free>>20)), errdefs.ErrResourceExhausted)
}

// freshDir makes dir empty (0700), its parent too.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
}

// wakeLocked restores a hibernated sandbox from its memory image; the
// caller holds e.mu. The image is checked first: one that is damaged or
// gone puts the sandbox in error (a start boots it from its files), one
// made by another runtime version is refused and kept.
func (c *Controller) wakeLocked(ctx context.Context, e *entry, rec *store.Sandbox, reason string) error {
	if rec.State != api.StateHibernated {
		return &InvalidTransitionError{ID: rec.ID, From: rec.State, To: api.StateRunning}
	}
	cp, err := c.checkpointer(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	dir := c.memoryDir(rec.ID)
	began := time.Now()
	if _, err := c.checkMemoryImage(dir, cp.CheckpointFormat(), "sandbox", rec.ID); err != nil { // memsnapshot.go
		if errors.Is(err, memimage.ErrDamaged) {
			_ = os.RemoveAll(dir)
			_ = c.setState(ctx, rec, api.StateError, "memory image unusable ("+err.Error()+"); start the sandbox to boot it from its files, without its memory and processes", false)
		}
		return fmt.Errorf("restore sandbox %s: %w", rec.ID, err)
	}
	img, err := c.opts.Images.Resolve(ctx, rec.ImageDigest)
	if err != nil {
		return fmt.Errorf("sandbox %s: its image %s is gone: %w", rec.ID, rec.ImageDigest, err)
	}
	restore := func(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
		return cp.Restore(ctx, spec, dir)
	}
	if err := c.launchCompute(ctx, e, rec, img, restore); err != nil {
		_ = os.RemoveAll(dir)
		c.stopAfterFailure(ctx, rec, "restore from the memory image failed ("+err.Error()+"); start the sandbox to boot it from its files")
		return err
	}
	c.carryProcesses(e)
	e.activity.Store(time.Now().UnixNano())
	if err := c.setState(ctx, rec, api.StateRunning, fmt.Sprintf("%s; restored from its memory image in %s", reason, time.Since(began).Round(time.Millisecond)), false); err != nil {
		return err
	}
	// From here the sandbox's files move on: the image is of no more use.
	if err := os.RemoveAll(dir); err != nil {
		c.log.Warn("remove a restored memory image", "sandbox", rec.ID, "err", err)
	}
	return nil
}

// reconcileHibernation settles, at a daemon start, a sandbox that was
// hibernating or hibernated. dctx bounds the teardown; the caller holds
// e.mu.
//   - Compute runs: a checkpoint or a restore the daemon did not see
//     through. Its agent is put back on its socket and adopted, and the
//     sandbox runs on; if it does not answer, it is stopped (files kept).
//   - No compute, a hibernated record: it stays hibernated while its
//     image is there; without one it is in error (a start boots it).
//   - No compute, a hibernating record: whether the checkpoint finished is
//     unknown, so its image is dropped and the sandbox is stopped.
func (c *Controller) reconcileHibernation(ctx, dctx context.Context, e *entry, rec *store.Sandbox, b runtime.Backend, status runtime.Status) {
	step := "hibernate"
	if rec.State == api.StateHibernated {
		step = "restore"
	}
	if status == runtime.StatusRunning || status == runtime.StatusPaused {
		if status == runtime.StatusPaused {
			if p, ok := b.(runtime.Pauser); ok {
				_ = p.Resume(dctx, rec.ID)
			}
		}
		_ = b.Signal(dctx, rec.ID, wire.SignalAttach)
		if err := c.adopt(ctx, e, rec); err == nil {
			c.dropMemory(rec.ID)
			_ = c.setState(ctx, rec, api.StateRunning, step+" interrupted by a daemon restart; the sandbox runs on", true)
			go c.terms.Recover(System(context.Background()), rec.ID) // internal/controller/terminals
			return
		}
		_ = b.Stop(dctx, rec.ID)
		c.dropMemory(rec.ID)
		_ = c.setState(ctx, rec, api.StateStopped, step+" interrupted by a daemon restart and the agent did not answer; stopped, files kept", true)
		return
	}
	if status != "" {
		_ = b.Stop(dctx, rec.ID) // a dead container and its mounts
	}
	if rec.State == api.StateHibernating {
		c.dropMemory(rec.ID)
		_ = c.setState(ctx, rec, api.StateStopped, "hibernate interrupted by a daemon restart before its memory image was complete; files kept, memory lost", true)
		return
	}
	if _, err := memimage.Read(c.memoryDir(rec.ID)); err != nil {
		c.dropMemory(rec.ID)
		_ = c.setState(ctx, rec, api.StateError, "memory image gone at daemon start ("+err.Error()+"); start the sandbox to boot it from its files", true)
	}
}

// carryProcesses notes that e.agent reaches the processes the client
// closed at the last hibernation reached; the caller holds e.mu.
func (c *Controller) carryProcesses(e *entry) {
	if e.hibernated == nil || e.agent == nil {
		return
	}
	if e.successors == nil {
		e.successors = map[*client.Client]*client.Client{}
	}
	e.successors[e.hibernated] = e.agent
	e.hibernated = nil
}

// dropMemory removes a sandbox's memory image, if it has one.
func (c *Controller) dropMemory(id string) {
	if err := os.RemoveAll(c.memoryDir(id)); err != nil {
		c.log.Warn("remove memory image", "sandbox", id, "err", err)
	}
}
