package oci

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// readPidFile reads the pid the runtime wrote for a container's init.
func readPidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("oci: read init pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("oci: init pid file holds %q", truncate(string(b), 20))
	}
	return pid, nil
}

// processAlive says whether pid names a process that has not exited: a
// zombie has exited even though its pid still exists.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	return procStatAlive(b)
}

// procStatAlive reads the state field of /proc/<pid>/stat, which follows
// the command name; the name is in parentheses and may itself hold them.
func procStatAlive(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// waitPidfd waits until the process behind pidfd has exited, at most d.
func waitPidfd(pidfd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

var _ runtime.Killer = (*Runtime)(nil)
