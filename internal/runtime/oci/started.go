package oci

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// startedPidfds holds, for each container this Runtime started or restored,
// a pidfd on the process whose end is the sandbox's (see Wait), opened the
// moment the runtime said it runs and kept until the container is stopped.
// It spares invocations of the runtime binary, each tens of milliseconds
// of CPU for runsc beside the sandbox's first requests:
//   - Wait watches a copy of it instead of asking `state` twice for the
//     pid (a Wait after a daemon restart finds none and asks);
//   - the agent of a runsc sandbox is signalled through it (detach before
//     a checkpoint, attach after a restore) instead of by `runsc kill`:
//     gVisor's sandbox process passes the signals it gets to the
//     container's init, the agent.
type startedPidfds struct {
	mu  sync.Mutex
	fds map[string]int
}

// open opens and keeps a pidfd on pid for sandbox id, closing one kept for
// an earlier run. A process already gone leaves nothing kept.
func (s *startedPidfds) open(id string, pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.fds[id]; ok {
		unix.Close(old)
		delete(s.fds, id)
	}
	if err != nil {
		return
	}
	if s.fds == nil {
		s.fds = make(map[string]int)
	}
	s.fds[id] = fd
}

// dup returns a copy of the kept pidfd of id for the caller to close.
func (s *startedPidfds) dup(id string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fd, ok := s.fds[id]
	if !ok {
		return -1, false
	}
	cp, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, false
	}
	return cp, true
}

// signal sends sig to the process kept for id. It reports false, having
// sent nothing, when none is kept; errNoContainer when it has ended.
func (s *startedPidfds) signal(id string, sig syscall.Signal) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fd, ok := s.fds[id]
	if !ok {
		return false, nil
	}
	err := unix.PidfdSendSignal(fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return true, errNoContainer
	}
	if err != nil {
		return true, fmt.Errorf("oci: signal sandbox %s: %w", id, err)
	}
	return true, nil
}

// drop closes the kept pidfd of id, if any: its container is being
// stopped or removed.
func (s *startedPidfds) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fd, ok := s.fds[id]; ok {
		unix.Close(fd)
		delete(s.fds, id)
	}
}
