package controller

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// A sandbox's disk is a sparse file of the size it was granted, on the
// state dir's file system: granting more than that file system has would
// let sandboxes fill the host's disk, and a full disk would stop being
// ENOSPC inside one sandbox only. Admission therefore keeps the sum of the
// disks granted to existing sandboxes within the file system's free
// space times the operator's overcommit ratio. The free space already
// excludes what those disks have written, so the check errs on the side
// of refusing.

// freeBytes is the space the state dir's file system has for its owner
// (statfs f_bavail); tests replace it.
var freeBytes = func(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// checkDisk refuses rec when its disk, with those of every other sandbox
// in all, would pass the host's space times the overcommit ratio. Call it
// under adm.quotaMu with all listed under that lock, so two creates cannot
// both take the last space.
//
// On the kubernetes backend a sandbox's disk is on a node (its home claim
// and its pod's ephemeral storage), not on the daemon's host: the cluster
// admits it there, and the host's space says nothing about it.
func (c *Controller) checkDisk(all []*store.Sandbox, rec *store.Sandbox) error {
	if c.cfg.Backend == config.BackendKubernetes {
		return nil
	}
	free, err := freeBytes(c.cfg.StateDir)
	if err != nil {
		// The daemon makes the state dir before anything else; a file
		// system that cannot be measured is reported, not a reason to
		// refuse every create.
		c.log.Warn("disk admission skipped: cannot measure the state dir's free space", "dir", c.cfg.StateDir, "err", err)
		return nil
	}
	ratio := c.cfg.DiskOvercommit
	if ratio <= 0 {
		ratio = 1
	}
	var granted int64
	for _, s := range all {
		if s.ID != rec.ID && s.State != api.StateDestroyed {
			granted += s.Resources.DiskMB
		}
	}
	capMB := int64(float64(free>>20) * ratio)
	if granted+rec.Resources.DiskMB <= capMB {
		return nil
	}
	return fmt.Errorf("disk %s refused: %s granted to other sandboxes of %s available (overcommit %g; the operator may raise PADDOCK_DISK_OVERCOMMIT): %w",
		mib(rec.Resources.DiskMB), mib(granted), mib(int64(free>>20)), ratio, errdefs.ErrResourceExhausted)
}

// mib shows a size in MiB as GiB when it is at least 1 GiB.
func mib(n int64) string {
	if n >= 1024 {
		return fmt.Sprintf("%.1f GiB", float64(n)/1024)
	}
	return fmt.Sprintf("%d MiB", n)
}
