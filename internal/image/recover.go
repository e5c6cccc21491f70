package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clearInterrupted removes what builds that died with their process left
// in tmp/. It is called with the store's build lock held exclusively, so
// no build of any process sharing the store is running. What it cannot
// remove is logged and left for the next start: a leftover must never keep
// the daemon from starting, since new builds take fresh directories.
func (s *Store) clearInterrupted() error {
	tmp := s.tmpDir()
	info, err := os.Lstat(tmp)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !info.IsDir():
		// tmp/ is the store's own; anything else in its place (a symlink
		// above all) is removed itself, never followed.
		s.log.Warn("removing what stands in place of the build directory", "path", tmp, "type", info.Mode().Type().String())
		return os.Remove(tmp)
	}
	// The store's own path may pass through symlinks (a state dir moved to
	// another disk); the mount table and /proc name real paths.
	real, err := filepath.EvalSymlinks(tmp)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(real, e.Name())
		if !e.IsDir() {
			// A temp ref file, or a symlink: removed, never followed.
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.log.Error("could not remove build debris; it stays until the next start", "path", p, "err", err)
			}
			continue
		}
		r, err := clearBuildDir(p)
		if err != nil {
			s.log.Error("could not clear an interrupted build; it stays until the next start",
				"dir", p, "killed", r.killed, "unmounted", r.unmounted, "err", err)
			continue
		}
		s.log.Info("removed an interrupted build", "dir", p, "killed", r.killed, "unmounted", r.unmounted)
	}
	return nil
}

// clearResult says what clearing one build directory took.
type clearResult struct {
	killed    []int    // processes that still ran inside it
	unmounted []string // mount points below it, relative to it
}

// procExitWait bounds how long clearing waits for killed processes to let
// go of the directory.
const procExitWait = 5 * time.Second

// clearBuildDir ends every process still working inside dir (a builder
// orphaned by a daemon that died before it), detaches every mount below it
// and deletes it.
func clearBuildDir(dir string) (clearResult, error) {
	var r clearResult
	info, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if !info.IsDir() {
		return r, os.Remove(dir) // a link is removed, never followed
	}
	// /proc and the mount table name real paths.
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return r, err
	}
	pids, err := procsUsing(dir)
	if err != nil {
		return r, err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			r.killed = append(r.killed, pid)
		}
	}
	if len(r.killed) > 0 {
		deadline := time.Now().Add(procExitWait)
		for {
			left, err := procsUsing(dir)
			if err != nil {
				return r, err
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return r, fmt.Errorf("processes %v still run inside it after SIGKILL", left)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	mounts, err := detachMounts(dir)
	for _, m := range mounts {
		rel, _ := filepath.Rel(dir, m)
		r.unmounted = append(r.unmounted, rel)
	}
	if err != nil {
		return r, err
	}
	return r, removeAllRetry(dir)
}

// removeAllRetry deletes dir, trying again a few times when a process that
// was just killed had created a file the first pass did not see.
func removeAllRetry(dir string) error {
	var err error
	for range 5 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// procsUsing lists the processes whose root or working directory is dir or
// below it: what an orphaned builder (chrooted dpkg, maintainer scripts)
// looks like from outside. Processes gone while looked at are skipped.
func procsUsing(dir string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		for _, link := range []string{"root", "cwd"} {
			t, err := os.Readlink(filepath.Join("/proc", e.Name(), link))
			if err == nil && within(dir, t) {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// within reports whether p is dir or a path below it; both are clean
// absolute paths. "/a/bc" is not within "/a/b".
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
