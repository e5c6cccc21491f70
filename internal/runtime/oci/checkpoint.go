package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

var _ runtime.Checkpointer = (*Runtime)(nil)

// originFile, in a checkpoint, names the sandbox it was taken of.
const originFile = "paddock-origin"

// checkpointOrigin is the id of the sandbox a checkpoint was taken of,
// or fallback when it does not say.
func checkpointOrigin(dir, fallback string) string {
	f, err := os.OpenFile(filepath.Join(dir, originFile), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fallback
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if id := string(b); err == nil && validID(id) {
		return id
	}
	return fallback
}

// detachTimeout bounds the wait for the agent to leave its socket before
// a checkpoint, and to be back on it after a restore.
const detachTimeout = 10 * time.Second

// CheckpointFormat names what a checkpoint of this runtime needs to be
// restored: gVisor's runsc at this exact build. Empty for a runtime that
// cannot checkpoint.
func (r *Runtime) CheckpointFormat() string {
	if r.CanCheckpoint() != nil {
		return ""
	}
	return "runsc " + r.version
}

// CanCheckpoint says why this runtime cannot keep a sandbox's memory, or
// nil if it can.
func (r *Runtime) CanCheckpoint() error {
	switch {
	case r.kind != KindRunsc:
		return fmt.Errorf("%s sandboxes cannot keep their memory on disk (that needs CRIU, which does not work on this host's kernel): create the sandbox with --runtime gvisor: %w", r.Name(), errdefs.ErrFailedPrecondition)
	case r.runscPre2023:
		return fmt.Errorf("this runsc (%s) cannot restore a checkpoint: use the gVisor build Paddock pins (PADDOCK_RUNSC unset, or scripts/install-deps.sh): %w", r.version, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// Checkpoint saves a running gVisor sandbox's memory and processes into
// dir and ends its container; its files stay as Stop leaves them. The
// agent is taken off its host socket first (gVisor cannot save a socket
// bound on the host) and, if the checkpoint fails, put back on it: the
// sandbox then runs on as before.
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := r.CanCheckpoint(); err != nil {
		return err
	}
	log := r.log.With("sandbox", id, "op", "checkpoint")
	steps := newStepTimer()
	defer steps.log(log, "checkpoint steps")
	if err := r.detachAgent(ctx, id); err != nil {
		return err
	}
	steps.mark("detach")
	if _, err := r.run(ctx, runOpts{}, "checkpoint", "--image-path", dir, "--exclude-committed-zero-pages", id); err != nil {
		log.Warn("checkpoint failed", "err", err)
		err = checkpointError(err, dir)
		// The caller finds out whether the sandbox survived by reaching
		// its agent; gVisor's sentry exits after a save that failed
		// while writing.
		if aerr := r.attachAgent(context.WithoutCancel(ctx), id); aerr != nil {
			log.Warn("the agent did not come back after the failed checkpoint", "err", aerr)
		}
		return err
	}
	steps.mark("checkpoint")
	// A copy restored under another id keeps this one inside gVisor (its
	// per-container cgroup is /<id>): the restore needs to know it.
	if err := writeFileAtomic(filepath.Join(dir, originFile), []byte(id), 0o600); err != nil {
		return err
	}
	// The sandbox winds down once its state is saved, and runsc says
	// "running" for a second or more meanwhile; nothing in it runs any
	// more, so it is deleted at once. Stop then finds no container and
	// removes the mounts, leaving the writable layer.
	if _, err := r.run(ctx, runOpts{}, "delete", "--force", id); err != nil && !isNotExist(err) {
		return fmt.Errorf("sandbox %s: remove the checkpointed container: %w", id, err)
	}
	if err := r.Stop(ctx, id); err != nil {
		return err
	}
	steps.mark("stop")
	return nil
}

// Restore starts spec's sandbox from the checkpoint in dir: the root
// filesystem is prepared as Start does (it must hold the files the
// checkpoint saw) and the container is restored instead of booted, then
// its agent listens again (start does both; an agent that does not come
// back undoes the restore as a failed start is undone).
func (r *Runtime) Restore(ctx context.Context, spec runtime.Spec, dir string) (runtime.Info, error) {
	if err := r.CanCheckpoint(); err != nil {
		return runtime.Info{}, err
	}
	return r.start(ctx, spec, dir)
}

// probeRestoreArgs returns the flags restore is given besides the image
// and bundle: --background where the build has it (it reads its help
// once, at the first restore). With it, restore returns once the
// sandbox's kernel state is loaded and its memory pages load behind it,
// each one waited for where it is touched first, so a restored sandbox
// answers before all of its memory is read. The image files are open by
// then: removing them (a hibernated sandbox's image once it is back, a
// deleted snapshot's) does not cut the load short.
func probeRestoreArgs(bin string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "restore", "--help").CombinedOutput()
	if strings.Contains(string(out), "-background") {
		return []string{"--background"}
	}
	return nil
}

// launchRestore makes the container from a checkpoint, detached.
func (r *Runtime) launchRestore(ctx context.Context, l layout, id, dir string, logf *os.File) (containerState, error) {
	pidFile, err := clearPidFile(l)
	if err != nil {
		return containerState{}, err
	}
	args := []string{"restore", "--detach", "--pid-file", pidFile}
	if r.restoreArgs != nil {
		args = append(args, r.restoreArgs()...)
	}
	args = append(args, "--image-path", dir, "--bundle", l.bundle, id)
	if _, err := r.run(ctx, runOpts{stdout: logf, stderr: logf}, args...); err != nil {
		return containerState{}, fmt.Errorf("%w: %s", err, logTail(l.agentLog, 1024))
	}
	return launchedState(id, pidFile) // lifecycle.go
}

// detachAgent has the agent close its socket and every connection on it
// (wire.SignalDetach) and waits until the socket file is gone.
func (r *Runtime) detachAgent(ctx context.Context, id string) error {
	sock := r.layout(id).socket
	if err := r.signalAgent(ctx, id, wire.SignalDetach); err != nil {
		return err
	}
	if err := waitPath(ctx, sock, false); err != nil {
		_ = r.signalAgent(context.WithoutCancel(ctx), id, wire.SignalAttach)
		return fmt.Errorf("sandbox %s: its agent did not leave its socket for the checkpoint: %w", id, err)
	}
	return nil
}

// attachAgent has the agent listen on its socket again and waits for it.
func (r *Runtime) attachAgent(ctx context.Context, id string) error {
	sends := 0
	send := func() error {
		if sends++; sends > 1 {
			r.log.Debug("attach sent again: the agent is not back on its socket yet", "sandbox", id, "sends", sends)
		}
		return r.signalAgent(ctx, id, wire.SignalAttach)
	}
	if err := resendUntilPath(ctx, r.layout(id).socket, send, detachTimeout); err != nil {
		return fmt.Errorf("sandbox %s: its agent did not listen again after the restore: %w", id, err)
	}
	return nil
}

// firstResend is how long resendUntilPath waits for the path before it
// sends again; the wait doubles up to maxResend.
const (
	firstResend = 250 * time.Millisecond
	maxResend   = 2 * time.Second
)

// resendUntilPath sends, then waits for path to exist, sending again each
// time a wait runs out, until limit has passed. A restored gVisor sandbox
// can drop a signal that reaches its sandbox process before that passes
// signals on to the container's init (a restore in the background returns
// early); the agent takes a repeated attach while attached as moot.
func resendUntilPath(ctx context.Context, path string, send func() error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	wait := firstResend
	for {
		if err := send(); err != nil {
			return err
		}
		until := time.Now().Add(wait)
		if until.After(deadline) {
			until = deadline
		}
		err := waitPathUntil(ctx, path, true, until)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, errdefs.ErrDeadlineExceeded):
			return err
		case !time.Now().Before(deadline):
			return fmt.Errorf("waited %s: %w", limit, err)
		}
		wait = min(wait*2, maxResend)
	}
}

// signalAgent sends sig to the sandbox's agent: through the pidfd kept
// since its start where there is one (started.go: gVisor's sandbox
// process passes it on to the container's init), else by `runsc kill`.
func (r *Runtime) signalAgent(ctx context.Context, id string, sig syscall.Signal) error {
	if r.kind == KindRunsc {
		if sent, err := r.started.signal(id, sig); sent {
			if errors.Is(err, errNoContainer) {
				return notFound(id)
			}
			return err
		}
	}
	if _, err := r.run(ctx, runOpts{}, "kill", id, strconv.Itoa(int(sig))); err != nil {
		if isNotExist(err) {
			return notFound(id)
		}
		return err
	}
	return nil
}

// waitPath waits until path exists (present) or is gone (!present),
// polling fast first, up to detachTimeout.
func waitPath(ctx context.Context, path string, present bool) error {
	if err := waitPathUntil(ctx, path, present, time.Now().Add(detachTimeout)); err != nil {
		if errors.Is(err, errdefs.ErrDeadlineExceeded) {
			return fmt.Errorf("waited %s: %w", detachTimeout, err)
		}
		return err
	}
	return nil
}

// waitPathUntil is waitPath up to deadline; running out of time is
// errdefs.ErrDeadlineExceeded.
func waitPathUntil(ctx context.Context, path string, present bool, deadline time.Time) error {
	delay := time.Millisecond
	for {
		_, err := os.Lstat(path)
		switch {
		case err == nil && present, errors.Is(err, fs.ErrNotExist) && !present:
			return nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if !time.Now().Before(deadline) {
			return errdefs.ErrDeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 20*time.Millisecond)
	}
}

// fullBelow is the free space under which a file system that a checkpoint
// failed to write into is taken to have filled up: gVisor writes its image
// in large pieces, and one that did not fit can leave megabytes free.
const fullBelow = 64 << 20

// checkpointError says why runsc checkpoint failed in a line: a file
// system that filled up (out of space or inodes) is named as such, and a
// sentry that panicked is reduced to its panic message rather than its
// stack, which the log keeps.
func checkpointError(err error, dir string) error {
	var st unix.Statfs_t
	if serr := unix.Statfs(dir, &st); serr == nil && (st.Bavail*uint64(st.Bsize) < fullBelow || (st.Files > 0 && st.Ffree == 0)) {
		return fmt.Errorf("runsc checkpoint: the file system for memory images filled up (%d MiB and %d inodes free): %w",
			st.Bavail*uint64(st.Bsize)>>20, st.Ffree, errdefs.ErrResourceExhausted)
	}
	var ce *cmdError
	if !errors.As(err, &ce) {
		return err
	}
	if strings.Contains(ce.stderr, "no space left on device") {
		return fmt.Errorf("runsc checkpoint: the file system for memory images filled up: %w", errdefs.ErrResourceExhausted)
	}
	for _, line := range strings.Split(ce.stderr, "\n") {
		if i := strings.Index(line, "panic: "); i >= 0 {
			msg := strings.TrimSpace(line[i:])
			if len(msg) > 512 {
				msg = msg[:512]
			}
			return fmt.Errorf("runsc checkpoint: the sandbox's kernel failed to save it: %s", msg)
		}
	}
	return err
}
