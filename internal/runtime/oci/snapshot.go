package oci

import (
	"context"
	"fmt"
	"os"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

var _ runtime.LayerSnapshotter = (*Runtime)(nil)

// SnapshotLayer copies the sandbox's writable layer into dst. The layer is
// controlled by the sandbox, so the copy reads it descriptor by descriptor
// without following symlinks and writes with the snapshot extractor's
// rules; the runtime's own mount points are left out.
func (r *Runtime) SnapshotLayer(ctx context.Context, id, dst string) error {
	if err := checkID(id); err != nil {
		return err
	}
	l := r.layout(id)
	if _, err := os.Lstat(l.disk); err != nil {
		if _, derr := os.Lstat(l.dir); derr != nil {
			return notFound(id)
		}
		return fmt.Errorf("sandbox %s has no writable layer: %w", id, errdefs.ErrFailedPrecondition)
	}
	mounted, err := isMountPoint(l.scratch)
	if err != nil {
		return err
	}
	if !mounted {
		// A stopped sandbox: mount its disk just for the copy.
		if err := mountDisk(l.disk, l.scratch, r.log); err != nil {
			return err
		}
		defer func() {
			if uerr := unmount(l.scratch); uerr != nil {
				r.log.Error("unmount after snapshot", "sandbox", id, "err", uerr)
			}
		}()
	}
	log := r.log.With("sandbox", id, "op", "snapshot")
	return snapshot.CopyTree(ctx, l.upper, dst, snapshot.TreeOptions{SkipTop: []string{".paddock"}, Warn: log.Warn})
}
