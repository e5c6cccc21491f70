package agent

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"golang.org/x/sys/unix"
)

// EnvOwnHome asks the agent to give the default user its home directory
// when that directory is a fresh volume owned by root (a Kubernetes
// PersistentVolumeClaim mounted over the image's home, whose storage does
// not apply fsGroup). Like every PADDOCK_AGENT_ variable, it stays out of
// the sandbox's processes.
const EnvOwnHome = wire.EnvOwnHome

// ownHome chowns the default user's home directory (not what it holds)
// to that user when root owns it and the user is not root. It never
// follows a symlink: the directory is opened with O_NOFOLLOW and changed
// through its descriptor.
func (a *Agent) ownHome() error {
	a.mu.RLock()
	name := a.defaultUser
	a.mu.RUnlock()
	u, err := a.users.Lookup(name)
	if err != nil {
		return fmt.Errorf("home volume: %w", err)
	}
	if u.UID == 0 || u.Home == "" || !filepath.IsAbs(u.Home) {
		return nil
	}
	fd, err := unix.Open(u.Home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("home volume %s: %w", u.Home, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("home volume %s: %w", u.Home, err)
	}
	if st.Uid != 0 {
		return nil
	}
	if err := unix.Fchown(fd, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("home volume %s: chown: %w", u.Home, err)
	}
	if err := unix.Fchmod(fd, 0o755); err != nil {
		return fmt.Errorf("home volume %s: chmod: %w", u.Home, err)
	}
	return nil
}

// ownHomeFromEnv runs ownHome when the environment asks for it.
// The home volume is also the sandbox's disk as usage reports it.
func (a *Agent) ownHomeFromEnv() {
	if os.Getenv(EnvOwnHome) != "1" {
		return
	}
	a.mu.RLock()
	name := a.defaultUser
	a.mu.RUnlock()
	if u, err := a.users.Lookup(name); err == nil && filepath.IsAbs(u.Home) {
		a.diskPath.Store(&u.Home)
	}
	if err := a.ownHome(); err != nil {
		a.log.Warn("cannot give the default user its home volume", "err", err)
	}
}
