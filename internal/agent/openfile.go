package agent

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Opening a named pipe blocks until the other end opens it, and opening a
// socket fails with ENXIO: a file request for either must be refused by
// type, never left hanging on a thread (each one counts against the
// sandbox's pids limit). Every open of a file the sandbox controls is
// non-blocking and checked with fstat after it, so a regular file swapped
// for a pipe between the check and the open is still caught.

// kindOf names a file type for a user.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}

// notRegular is the refusal for a path that is no regular file.
func notRegular(path string, m fs.FileMode) error {
	return errdefs.Invalid("%s is %s, not a regular file", path, kindOf(m))
}

// openRegular opens path (following symlinks) with flag, which must not
// create, and only if it is a regular file. The descriptor is left in
// non-blocking mode, which regular files ignore.
func openRegular(op, path string, flag int) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fsError(op, path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, openError(op, path, err)
	}
	fi, err = checkRegular(f, path)
	if err != nil {
		return nil, nil, err
	}
	return f, fi, nil
}

// checkRegular fstats an open file and closes it unless it is regular.
func checkRegular(f *os.File, path string) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fsError("stat", path, err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, notRegular(path, fi.Mode())
	}
	return fi, nil
}

// openError explains a failed open: ENXIO is what a non-blocking open
// answers for a socket, or for a pipe opened to write with no reader, so it
// is told as the type the path turned out to be.
func openError(op, path string, err error) error {
	if errors.Is(err, syscall.ENXIO) {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return notRegular(path, fi.Mode())
		}
	}
	return fsError(op, path, err)
}
