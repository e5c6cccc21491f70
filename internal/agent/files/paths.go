package files

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/agent/users"
)

// chownTo gives a new file to the requesting user. Without CAP_CHOWN (the
// agent run unprivileged, as in tests) files stay the agent's, which is then
// the same account anyway.
func chownTo(path string, u *users.User) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.Lchown(path, int(u.UID), int(u.GID)); err != nil {
		return safefs.Error("chown", path, err)
	}
	return nil
}

// mkdirAllOwned creates dir and its missing parents, each owned by u.
func mkdirAllOwned(dir string, u *users.User) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return safefs.Error("mkdir", dir, syscall.ENOTDIR)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return safefs.Error("mkdir", dir, err)
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllOwned(parent, u); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return safefs.Error("mkdir", dir, err)
	}
	return chownTo(dir, u)
}
