package oci

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// diskHolder is a process that keeps a stopped sandbox's disk in use: its
// mount namespace still has the disk's loop device mounted, or it has a
// file of that file system open.
type diskHolder struct {
	pid int
	cmd string
}

func (h diskHolder) String() string { return fmt.Sprintf("pid %d (%s)", h.pid, h.cmd) }

// diskHolders finds the processes holding the file system on loop device
// dev (a path such as /dev/loop3). It reads every process's mountinfo and
// open files, so it runs only once a release is overdue.
func diskHolders(dev string) []diskHolder {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return nil
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []diskHolder
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if mountsDev(p, dev) || hasFileOn(p, st.Rdev) {
			out = append(out, diskHolder{pid: pid, cmd: cmdline(p)})
		}
	}
	return out
}

// mountsDev says whether the process's mount namespace has dev mounted.
func mountsDev(proc, dev string) bool {
	b, err := os.ReadFile(proc + "/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		_, after, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		if f := strings.Fields(after); len(f) >= 2 && f[1] == dev {
			return true
		}
	}
	return false
}

// hasFileOn says whether the process has a file open on device rdev.
func hasFileOn(proc string, rdev uint64) bool {
	fds, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return false
	}
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Stat(proc+"/fd/"+fd.Name(), &st) == nil && st.Dev == rdev {
			return true
		}
	}
	return false
}

// cmdline is the process's command line, spaces for NULs, at most 200
// bytes.
func cmdline(proc string) string {
	b, _ := os.ReadFile(proc + "/cmdline")
	b = bytes.TrimRight(b, "\x00")
	s := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// ownedBy says whether the holder is one of the sandbox's own runtime
// processes (a gVisor gofer or sentry that outlived its sandbox): its
// command line names the sandbox's directory.
func (h diskHolder) ownedBy(sandboxDir string) bool {
	return sandboxDir != "" && strings.Contains(h.cmd, sandboxDir+string(filepath.Separator))
}
