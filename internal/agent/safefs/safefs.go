// Package safefs is how the agent opens the files of its sandbox, which the
// sandbox's processes control, and how it words its file system errors:
// every open of such a file is non-blocking and checked for a regular file
// after it, and every error is mapped to the error vocabulary with the path
// named but not the agent's internals. It imports no other part of the
// agent.
package safefs

import (
	"errors"
	"fmt"
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

// kind names a file type for a user.
func kind(m fs.FileMode) string {
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
	return errdefs.Invalid("%s is %s, not a regular file", path, kind(m))
}

// OpenRegular opens path (following symlinks) with flag, which must not
// create, and only if it is a regular file. The descriptor is left in
// non-blocking mode, which regular files ignore.
func OpenRegular(op, path string, flag int) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, Error(op, path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, OpenError(op, path, err)
	}
	fi, err = CheckRegular(f, path)
	if err != nil {
		return nil, nil, err
	}
	return f, fi, nil
}

// CheckRegular fstats an open file and closes it unless it is regular.
func CheckRegular(f *os.File, path string) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, Error("stat", path, err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, notRegular(path, fi.Mode())
	}
	return fi, nil
}

// OpenError explains a failed open: ENXIO is what a non-blocking open
// answers for a socket, or for a pipe opened to write with no reader, so it
// is told as the type the path turned out to be.
func OpenError(op, path string, err error) error {
	if errors.Is(err, syscall.ENXIO) {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return notRegular(path, fi.Mode())
		}
	}
	return Error(op, path, err)
}

// Error maps a filesystem error to the error vocabulary with a message
// that names the path but not the agent's internals.
func Error(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sentinel = errdefs.ErrNotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		sentinel = errdefs.ErrConflict
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		sentinel = errdefs.ErrPermissionDenied
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EXDEV):
		sentinel = errdefs.ErrInvalidArgument
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		sentinel = errdefs.ErrResourceExhausted
	case errors.Is(err, syscall.EBUSY):
		// A mount point (Paddock's agent binary is one): not the
		// sandbox's to replace or remove.
		return fmt.Errorf("%s %s: it is a mount point, which cannot be replaced or removed: %w", op, path, errdefs.ErrFailedPrecondition)
	case errors.Is(err, syscall.ETXTBSY):
		return fmt.Errorf("%s %s: it is a program that is running, which cannot be written: %w", op, path, errdefs.ErrFailedPrecondition)
	case errors.Is(err, syscall.ENXIO):
		sentinel = errdefs.ErrInvalidArgument
	default:
		return fmt.Errorf("%s %s: %v", op, path, Errno(err))
	}
	return fmt.Errorf("%s %s: %s: %w", op, path, Errno(err), sentinel)
}

// Errno is the system error's own text, without the operation and path
// Go adds to it.
func Errno(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
