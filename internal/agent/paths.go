package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// maxPathLen bounds request paths (PATH_MAX).
const maxPathLen = 4096

// resolvePath turns a request path into a clean absolute path: relative
// paths and "~" are taken from the user's home, as envd does. The agent runs
// inside the sandbox, so the result can only name sandbox files; cleaning
// is about clear errors and predictable names, not containment.
func resolvePath(u *User, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.Invalid("path contains a NUL byte")
	}
	if len(p) > maxPathLen {
		return "", errdefs.Invalid("path is longer than %d bytes", maxPathLen)
	}
	switch {
	case p == "" || p == "~":
		return u.Home, nil
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(u.Home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(u.Home, p)
	}
	return filepath.Clean(p), nil
}

// fsError maps a filesystem error to the error vocabulary with a message
// that names the path but not the agent's internals.
func fsError(op, path string, err error) error {
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
		return fmt.Errorf("%s %s: %v", op, path, errnoText(err))
	}
	return fmt.Errorf("%s %s: %s: %w", op, path, errnoText(err), sentinel)
}

func errnoText(err error) string {
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

// chownTo gives a new file to the requesting user. Without CAP_CHOWN (the
// agent run unprivileged, as in tests) files stay the agent's, which is then
// the same account anyway.
func chownTo(path string, u *User) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.Lchown(path, int(u.UID), int(u.GID)); err != nil {
		return fsError("chown", path, err)
	}
	return nil
}

// mkdirAllOwned creates dir and its missing parents, each owned by u.
func mkdirAllOwned(dir string, u *User) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fsError("mkdir", dir, syscall.ENOTDIR)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fsError("mkdir", dir, err)
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllOwned(parent, u); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fsError("mkdir", dir, err)
	}
	return chownTo(dir, u)
}
