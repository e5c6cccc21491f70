package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/cgroupstat"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

var _ runtime.UsageReader = (*Runtime)(nil)

// Usage reads the sandbox's cgroup (v2, or v1's cpuacct and memory
// hierarchies) and the statfs of its writable layer. The files read are
// the kernel's, under cgroupfs, which a sandbox cannot replace.
func (r *Runtime) Usage(ctx context.Context, id string) (runtime.Usage, error) {
	if err := checkID(id); err != nil {
		return runtime.Usage{}, err
	}
	var cg cgroupstat.Reading
	var err error
	if r.host.cgroupV2 {
		cg, err = cgroupstat.V2(filepath.Join(cgroupRoot, r.cgroupParent, id))
	} else {
		cg, err = cgroupstat.V1(cgroupRoot, filepath.Join(r.cgroupParent, id))
	}
	if err != nil {
		return runtime.Usage{}, usageErr(id, err)
	}
	u := runtime.Usage{CPUNanos: cg.CPUNanos, MemoryBytes: cg.MemoryBytes, MemoryCacheBytes: cg.MemoryCacheBytes, MemoryLimitBytes: cg.MemoryLimitBytes}
	var st unix.Statfs_t
	if err := unix.Statfs(r.layout(id).scratch, &st); err == nil {
		bs := uint64(st.Bsize)
		u.DiskTotalBytes = st.Blocks * bs
		u.DiskUsedBytes = (st.Blocks - st.Bfree) * bs
	}
	return u, nil
}

func usageErr(id string, err error) error {
	if os.IsNotExist(err) {
		return fmt.Errorf("sandbox %s has no cgroup (is it running?): %w", id, errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("read usage of sandbox %s: %w", id, err)
}
