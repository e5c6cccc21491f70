package oci

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// agentExitName is the file in the agent's run directory where the agent
// records how it ended ("signal N", "status N"); internal/agent writes it
// under the same name. Root inside the sandbox can write it too, so it is
// read as untrusted: bounded, never followed, parsed strictly.
const agentExitName = "agent.exit"

// Reasons a sandbox ended by itself, as the API shows them.
const (
	reasonOOM         = "out of memory"
	reasonSentry      = "gVisor sentry killed"
	reasonAgentExited = "agent exited"
)

var _ runtime.Watcher = (*Runtime)(nil)

// Wait blocks until the sandbox's container ends and says why. It watches
// a pidfd of the process whose end is the sandbox's: runc's container init
// (the agent), or runsc's sandbox process (the sentry), which ends with
// the container's init. A pidfd says so the moment it happens, costs no
// process and no polling, and is taken anew after a daemon restart.
func (r *Runtime) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	if err := checkID(id); err != nil {
		return runtime.Exit{}, err
	}
	pidfd, ok := r.started.dup(id) // started.go
	var err error
	if !ok {
		pidfd, err = r.openInitPidfd(ctx, id)
	}
	if errors.Is(err, errNoContainer) {
		return r.exitReason(id), nil
	}
	if err != nil {
		return runtime.Exit{}, err
	}
	if err := waitPidfdCtx(ctx, pidfd); err != nil {
		return runtime.Exit{}, err
	}
	return r.exitReason(id), nil
}

// openInitPidfd opens a pidfd on the process to watch, or errNoContainer
// when the container runs no more.
func (r *Runtime) openInitPidfd(ctx context.Context, id string) (int, error) {
	if r.kind == KindRunc {
		st, err := r.readRuncInit(id)
		if err == nil {
			fd, err := unix.PidfdOpen(st.Pid, unix.PIDFD_NONBLOCK)
			if errors.Is(err, unix.ESRCH) {
				return -1, errNoContainer
			}
			if err != nil {
				return -1, fmt.Errorf("oci: pidfd of %s: %w", id, err)
			}
			// The pidfd pins the process: if it is the init runc
			// recorded (same start time), it is the one to watch.
			if !sameStart(st) {
				unix.Close(fd)
				return -1, errNoContainer
			}
			return fd, nil
		}
		// No readable state file: ask runc below.
	}
	st, err := r.containerState(ctx, id)
	if err != nil {
		return -1, err
	}
	if (st.Status != "running" && st.Status != "paused") || st.Pid <= 0 {
		return -1, errNoContainer
	}
	fd, err := unix.PidfdOpen(st.Pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return -1, errNoContainer
	}
	if err != nil {
		return -1, fmt.Errorf("oci: pidfd of %s: %w", id, err)
	}
	// The state was read before the pidfd was opened: a pid reused in
	// between is told apart by asking once more.
	if again, err := r.containerState(ctx, id); err != nil || again.Pid != st.Pid || again.Status == "stopped" {
		unix.Close(fd)
		return -1, errNoContainer
	}
	return fd, nil
}

func (r *Runtime) readRuncInit(id string) (runcInit, error) {
	f, err := os.OpenFile(filepath.Join(r.stateDir(), id, "state.json"), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return runcInit{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRuncStateFile))
	if err != nil {
		return runcInit{}, err
	}
	return parseRuncInit(b)
}

func sameStart(st runcInit) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/stat")
	if err != nil {
		return false
	}
	start, ok := procStartTime(stat)
	return ok && start == st.Start
}

// waitPidfdCtx blocks until the process ends or ctx does. The pidfd is
// non-blocking and waited on by Go's poller, so a watched sandbox holds no
// thread while it runs. It takes ownership of pidfd.
func waitPidfdCtx(ctx context.Context, pidfd int) error {
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("oci: pidfd: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("oci: wait on pidfd: %w", err)
	}
	return nil
}

// exitReason says why the sandbox's container ended, from what the agent
// recorded and the memory cgroup's OOM kill count. It runs before the
// container is deleted, while its cgroup still holds the counters.
func (r *Runtime) exitReason(id string) runtime.Exit {
	rec := readExitRecord(filepath.Join(r.layout(id).run, agentExitName))
	oom := r.oomKills(id) > 0
	if r.kind == KindRunsc {
		switch {
		case rec != "":
			return runtime.Exit{Reason: reasonAgentExited + ": " + rec, Known: true}
		case oom:
			return runtime.Exit{Reason: reasonSentry + ": " + reasonOOM, Known: true}
		}
		return runtime.Exit{Reason: reasonSentry}
	}
	switch {
	case rec != "":
		return runtime.Exit{Reason: reasonAgentExited + ": " + rec, Known: true}
	case oom:
		return runtime.Exit{Reason: reasonOOM, Known: true}
	}
	return runtime.Exit{Reason: reasonAgentExited + " (killed from outside the agent)"}
}

// readExitRecord returns the agent's exit record as "signal N" or
// "status N", or "" when there is none or it is not of that form.
func readExitRecord(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return ""
	}
	return parseExitRecord(b)
}

func parseExitRecord(b []byte) string {
	kind, num, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok {
		return ""
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return ""
	}
	switch {
	case kind == "signal" && n >= 1 && n <= 64:
	case kind == "status" && n >= 0 && n <= 255:
	default:
		return ""
	}
	return kind + " " + strconv.Itoa(n)
}

// clearExitRecord removes a record left by an earlier run of the agent.
func clearExitRecord(runDir string) error {
	if err := os.Remove(filepath.Join(runDir, agentExitName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("oci: clear old agent exit record: %w", err)
	}
	return nil
}

var _ runtime.OOMCounter = (*Runtime)(nil)

// OOMKills is how many processes the kernel's OOM killer ended in the
// sandbox's memory cgroup since its container started (v1:
// memory.oom_control, v2: memory.events). For gVisor it counts the
// sandbox's host processes (the sentry), not processes inside it.
func (r *Runtime) OOMKills(id string) (int64, bool) {
	if r.host.oomFile == "" || !validID(id) {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(r.host.memCgroup, r.cgroupParent, id, r.host.oomFile))
	if err != nil {
		return 0, false
	}
	return parseOOMKills(b)
}

func (r *Runtime) oomKills(id string) int64 {
	n, _ := r.OOMKills(id)
	return n
}

// parseOOMKills reads the "oom_kill N" line both cgroup versions have.
func parseOOMKills(b []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "oom_kill" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
