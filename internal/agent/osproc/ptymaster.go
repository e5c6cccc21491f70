package osproc

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// OpenPTY opens a terminal pair whose master is driven by Go's poller, so
// read and write deadlines work on it.
//
// pty.Open leaves the master in blocking mode (its ioctls go through
// File.Fd), and a blocking read ignores deadlines: it returns only when the
// kernel says so. Linux ends it with EIO once the last slave descriptor
// closes, but gVisor's terminal never does (the master just stays empty:
// no POLLHUP, EAGAIN in nonblocking mode), so on gVisor a pump blocked
// there never returned and the process's end was never reported. With a
// Pollable master the drain deadline set after the exit ends the pump on
// both kernels, and Linux's EIO still ends it early without losing output.
func OpenPTY() (master, slave *os.File, err error) {
	m, s, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	nb, err := Pollable(m)
	_ = m.Close()
	if err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	return nb, s, nil
}

// Pollable returns a nonblocking duplicate of f that os.NewFile registers
// with the poller; f itself cannot be switched back once Fd was called.
func Pollable(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(old uintptr) {
		fd, dupErr = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, fmt.Errorf("duplicate terminal master: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("make terminal master nonblocking: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// SetWinsize resizes a terminal through its raw descriptor without File.Fd,
// which would put the master back into blocking mode.
func SetWinsize(f *os.File, cols, rows uint16) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	}); err != nil {
		return err
	}
	return ioErr
}
