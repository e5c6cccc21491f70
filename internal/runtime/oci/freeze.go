package oci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// freezeTimeout bounds how long the direct freeze waits for a cgroup to
// report FROZEN before it hands over to `runc pause`, whose own loop knows
// how to unstick a cgroup that stays FREEZING.
const freezeTimeout = time.Second

// freezer is the file that freezes one sandbox's cgroup and how to read
// its state back.
type freezer struct {
	v2    bool
	dir   string
	state string // v1 freezer.state, v2 cgroup.freeze
}

// freezerOf finds the freezer of a runc sandbox's cgroup: the v1 freezer
// hierarchy's freezer.state where there is one (also on hybrid hosts,
// where runc freezes through v1 and a v2 cgroup.freeze beside it would go
// unseen by `runc state`), otherwise, on a host with only the unified
// hierarchy, cgroup.freeze.
func (r *Runtime) freezerOf(id string) (freezer, error) {
	ms, err := readMounts()
	if err != nil {
		return freezer{}, err
	}
	var v2 []string
	for _, m := range ms {
		switch m.fsType {
		case "cgroup":
			if !slices.Contains(strings.Split(m.superOpts, ","), "freezer") {
				continue
			}
			dir := filepath.Join(m.mountPoint, r.cgroupParent, id)
			if _, err := os.Lstat(filepath.Join(dir, "freezer.state")); err != nil {
				return freezer{}, fmt.Errorf("oci: no v1 freezer for %s: %w", id, err)
			}
			return freezer{dir: dir, state: filepath.Join(dir, "freezer.state")}, nil
		case "cgroup2":
			v2 = append(v2, m.mountPoint)
		}
	}
	if len(v2) != 1 {
		return freezer{}, fmt.Errorf("oci: %d unified cgroup hierarchies and no v1 freezer", len(v2))
	}
	dir := filepath.Join(v2[0], r.cgroupParent, id)
	if _, err := os.Lstat(filepath.Join(dir, "cgroup.freeze")); err != nil {
		return freezer{}, fmt.Errorf("oci: no cgroup.freeze for %s: %w", id, err)
	}
	return freezer{v2: true, dir: dir, state: filepath.Join(dir, "cgroup.freeze")}, nil
}

// set freezes or thaws the cgroup and waits until the kernel reports it
// done: v1's freezer.state reads FROZEN (not FREEZING) or THAWED, v2's
// cgroup.events says "frozen 1" or "frozen 0".
func (f freezer) set(freeze bool) error {
	want := map[bool]string{true: "FROZEN", false: "THAWED"}[freeze]
	if f.v2 {
		want = map[bool]string{true: "1", false: "0"}[freeze]
	}
	if err := os.WriteFile(f.state, []byte(want), 0); err != nil {
		return fmt.Errorf("oci: write %s: %w", f.state, err)
	}
	deadline := time.Now().Add(freezeTimeout)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		done, err := f.reached(want)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("oci: cgroup %s did not reach %s within %s", f.dir, want, freezeTimeout)
		}
		time.Sleep(wait)
	}
}

func (f freezer) reached(want string) (bool, error) {
	if !f.v2 {
		b, err := os.ReadFile(f.state)
		if err != nil {
			return false, err
		}
		return string(bytes.TrimSpace(b)) == want, nil
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "cgroup.events"))
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "frozen" {
			return v == want, nil
		}
	}
	return false, errors.New("oci: cgroup.events has no frozen line")
}

// fastFreeze freezes or thaws a runc sandbox by writing its cgroup's
// freezer directly: `runc pause` and `runc resume` do the same write, but
// each costs a process (tens of milliseconds on a busy host) and a
// snapshot takes one of each. runc keeps no paused flag of its own (it
// reads the freezer for `runc state`), so both paths agree on the state.
// Any doubt (no freezer found, a cgroup slow to settle) returns an error
// and the caller asks runc instead.
func (r *Runtime) fastFreeze(id string, freeze bool) error {
	if r.kind != KindRunc {
		return errSlowPath
	}
	if freeze && !r.initAlive(id) {
		// runc refuses to pause a container whose init is gone; let it
		// say so rather than freeze an empty cgroup.
		return errSlowPath
	}
	f, err := r.freezerOf(id)
	if err != nil {
		return err
	}
	return f.set(freeze)
}

// initAlive says whether the init that runc's state file names for id is
// still that process.
func (r *Runtime) initAlive(id string) bool {
	f, err := os.OpenFile(filepath.Join(r.stateDir(), id, "state.json"), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRuncStateFile))
	f.Close()
	if err != nil {
		return false
	}
	st, err := parseRuncInit(b)
	if err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/stat")
	if err != nil {
		return false
	}
	start, ok := procStartTime(stat)
	return ok && start == st.Start
}
