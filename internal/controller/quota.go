package controller

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// localStoreBytes is what the local store holds on disk: the blocks of
// every distinct inode of the stored snapshot layers and their object pool
// (a file many layers share is one inode, so it counts once), plus every
// local backup archive. Temporary files are left out: they either become
// one of those or go.
func (c *Controller) localStoreBytes() int64 {
	var n int64
	if c.opts.Snapshots != nil {
		n += c.opts.Snapshots.DiskUsage()
	}
	if entries, err := os.ReadDir(c.BackupsDir()); err == nil {
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".tar.gz") {
				continue
			}
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				n += fileBlocks(info)
			}
		}
	}
	return n
}

// fileBlocks is the disk space a file takes, or its size where the
// filesystem does not say.
func fileBlocks(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// storeUsage reports the local store's use and cap for Info and listings.
func (c *Controller) storeUsage() *api.StoreUsage {
	if c.opts.Snapshots == nil && c.cfg.SnapshotStoreMax == 0 {
		return nil
	}
	return &api.StoreUsage{UsedBytes: c.localStoreBytes(), LimitBytes: c.cfg.SnapshotStoreMax}
}

// StoreUsage is storeUsage for the server.
func (c *Controller) StoreUsage() *api.StoreUsage { return c.storeUsage() }

// BackupsDir is where local backup archives are kept
// (internal/controller/backups); the local store's cap counts them with
// the snapshots.
func (c *Controller) BackupsDir() string { return filepath.Join(c.cfg.StateDir, "backups") }

// StoreRoom refuses adding bytes to the local store past its cap (0: asks
// whether it is already full) and, when place is set, runs it with the
// store's lock held, so two writers cannot both pass on the same room.
func (c *Controller) StoreRoom(adding int64, place func() error) error {
	if place == nil {
		return c.checkStoreRoom(adding)
	}
	c.snaps.mu.Lock()
	defer c.snaps.mu.Unlock()
	if err := c.checkStoreRoom(adding); err != nil {
		return err
	}
	return place()
}

// checkStoreRoom refuses adding more bytes to the local store than its cap
// allows. adding 0 asks whether the store is already full, before work
// that would be wasted.
func (c *Controller) checkStoreRoom(adding int64) error {
	limit := c.cfg.SnapshotStoreMax
	if limit <= 0 {
		return nil
	}
	used := c.localStoreBytes()
	if used+adding > limit || (adding == 0 && used >= limit) {
		return fmt.Errorf("the snapshot store is full: it holds %d bytes, this needs %d more, and its limit is %d (PADDOCK_SNAPSHOT_STORE_MAX); delete snapshots or backups to make room: %w",
			used, adding, limit, errdefs.ErrResourceExhausted)
	}
	return nil
}

// layerSet is the set of digests stored now, to tell after a commit or an
// import which layers it added.
func (c *Controller) layerSet() map[string]bool {
	out := map[string]bool{}
	if c.opts.Snapshots == nil {
		return out
	}
	ds, _ := c.opts.Snapshots.Layers()
	for _, d := range ds {
		out[d] = true
	}
	return out
}

// enforceQuotaAfter undoes layers added since before when the store is now
// over its cap. The caller holds c.snaps.mu, so the collector and other
// snapshots do not interleave.
func (c *Controller) enforceQuotaAfter(before map[string]bool) error {
	limit := c.cfg.SnapshotStoreMax
	if limit <= 0 || c.opts.Snapshots == nil {
		return nil
	}
	used := c.localStoreBytes()
	if used <= limit {
		return nil
	}
	var added []string
	for d := range c.layerSet() {
		if !before[d] {
			added = append(added, d)
		}
	}
	if len(added) == 0 {
		// Nothing new was stored (the layers were duplicates): no growth.
		return nil
	}
	for _, d := range added {
		if err := c.opts.Snapshots.RemoveLayer(d); err != nil {
			c.log.Warn("remove a layer over the store's limit", "layer", d, "err", err)
		}
	}
	// What removing them gave back (their new files and directories) is
	// what they needed.
	need := max(used-c.localStoreBytes(), 0)
	return fmt.Errorf("the snapshot store is full: this needs %d bytes, it would hold %d and its limit is %d (PADDOCK_SNAPSHOT_STORE_MAX); nothing was kept; delete snapshots or backups to make room: %w",
		need, used, limit, errdefs.ErrResourceExhausted)
}
