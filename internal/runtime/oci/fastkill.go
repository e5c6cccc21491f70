package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxRuncStateFile bounds the read of runc's state file: it holds the
// container's config, tens of KiB at most for the specs this runtime writes.
const maxRuncStateFile = 4 << 20

// runcInit is the part of runc's state file (<root>/<id>/state.json) that
// names the container's init: its pid, and its start time in clock ticks
// since boot, which tells that pid apart from a later process reusing it.
type runcInit struct {
	Pid   int    `json:"init_process_pid"`
	Start uint64 `json:"init_process_start"`
}

// parseRuncInit reads the init fields of runc's state file.
func parseRuncInit(b []byte) (runcInit, error) {
	var st runcInit
	if err := json.Unmarshal(b, &st); err != nil {
		return runcInit{}, fmt.Errorf("oci: parse runc state file: %w", err)
	}
	if st.Pid <= 0 || st.Start == 0 {
		return runcInit{}, fmt.Errorf("oci: runc state file names no init (pid %d)", st.Pid)
	}
	return st, nil
}

// procStartTime reads the start time (field 22, clock ticks since boot)
// from /proc/<pid>/stat. The command name before it is in parentheses and
// may itself hold spaces and parentheses, so fields count from the last ')'.
func procStartTime(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// errSlowPath says the fast kill could not decide and the runtime binary
// must be asked (a frozen cgroup, an unreadable state file).
var errSlowPath = errors.New("oci: fast kill not applicable")

// fastKill ends a runc container without the `runc state` and `runc kill`
// processes (about 5 ms each): runc's own state file names init, and a
// pidfd signals and watches it. With deleteNow, `runc delete` follows;
// without, the dead container's record and empty cgroup stay for Destroy.
// It returns errSlowPath when the caller must take the runtime-binary
// path, and found=false with a nil error when there is no container.
func (r *Runtime) fastKill(ctx context.Context, id string, deleteNow bool) (found bool, err error) {
	if r.kind != KindRunc {
		return false, errSlowPath
	}
	dir := filepath.Join(r.stateDir(), id)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		// runc keeps a container exactly as long as this directory: with
		// none there is nothing to kill or delete.
		return false, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "state.json"), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// Mid-create (no state file yet) or anything unusual: let runc say.
		return true, errSlowPath
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRuncStateFile))
	f.Close()
	if err != nil {
		return true, errSlowPath
	}
	st, err := parseRuncInit(b)
	if err != nil {
		return true, errSlowPath
	}
	if r.frozen(id) {
		// A frozen init does not die of SIGKILL on cgroup v1: the slow path
		// thaws it first.
		return true, errSlowPath
	}
	if err := killInit(st); err != nil {
		return true, errSlowPath
	}
	if !deleteNow {
		return true, nil
	}
	if _, err := r.run(ctx, runOpts{}, "delete", "--force", id); err != nil && !isNotExist(err) {
		return true, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return true, nil
}

// killInit SIGKILLs the process st names, if it is still that process,
// and waits for it to exit. Init's death ends its whole pid namespace.
func killInit(st runcInit) error {
	pidfd, err := unix.PidfdOpen(st.Pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil // exited and reaped already
	}
	if err != nil {
		return err
	}
	defer unix.Close(pidfd)
	// The pidfd was opened before this check, so if the pid still has
	// init's start time now, the pidfd is init's and not a newcomer's.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/stat")
	if err != nil {
		return nil // gone between the open and the read
	}
	start, ok := procStartTime(stat)
	if !ok {
		return errSlowPath
	}
	if start != st.Start {
		return nil // the pid now names another process: init is gone
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	if !waitPidfd(pidfd, 2*time.Second) {
		return errSlowPath
	}
	return nil
}

// frozen says whether the sandbox's cgroup is frozen or freezing (v1
// freezer.state, or v2 cgroup.freeze). Unreadable files count as thawed:
// a missing freezer means nothing can be frozen.
func (r *Runtime) frozen(id string) bool {
	mounts, err := cgroupMounts()
	if err != nil {
		return true // cannot tell: the slow path asks runc
	}
	for _, m := range mounts {
		dir := filepath.Join(m, r.cgroupParent, id)
		if b, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err == nil {
			if s := string(bytes.TrimSpace(b)); s != "THAWED" {
				return true
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); err == nil {
			if string(bytes.TrimSpace(b)) != "0" {
				return true
			}
		}
	}
	return false
}
