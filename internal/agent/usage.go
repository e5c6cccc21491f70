package agent

import (
	"encoding/json"
	"fmt"
	"net/http"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/cgroupstat"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// handleUsage answers wire.UsagePath: the agent's own cgroup (in a pod,
// its container's: the whole sandbox, since every process of it descends
// from the agent) and the statfs of the sandbox's disk: its home volume
// when it has one (sized as the sandbox's disk), else the root
// filesystem.
func (a *Agent) handleUsage(w http.ResponseWriter, _ *http.Request) {
	disk := "/"
	if p := a.diskPath.Load(); p != nil {
		disk = *p
	}
	u, err := ownUsage(disk)
	if err != nil {
		reply.Error(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(u)
}

func ownUsage(disk string) (wire.Usage, error) {
	cg, err := cgroupstat.Own()
	if err != nil {
		return wire.Usage{}, fmt.Errorf("read the sandbox's cgroup under %s: %v: %w", cgroupstat.Root, err, errdefs.ErrFailedPrecondition)
	}
	u := wire.Usage{CPUNanos: cg.CPUNanos, MemoryBytes: cg.MemoryBytes, MemoryCacheBytes: cg.MemoryCacheBytes, MemoryLimitBytes: cg.MemoryLimitBytes}
	var st unix.Statfs_t
	if err := unix.Statfs(disk, &st); err == nil {
		bs := uint64(st.Bsize)
		u.DiskTotalBytes = st.Blocks * bs
		u.DiskUsedBytes = (st.Blocks - st.Bfree) * bs
	}
	return u, nil
}
