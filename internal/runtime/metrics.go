package runtime

import "context"

// Usage is a point-in-time reading of a sandbox's resource use, taken from
// its cgroup and its writable layer's filesystem.
type Usage struct {
	// CPUNanos is the CPU time used since the container started.
	CPUNanos uint64
	// MemoryBytes is current memory use; MemoryCacheBytes the part of it
	// that is page cache; MemoryLimitBytes the hard limit (0 if none).
	MemoryBytes      uint64
	MemoryCacheBytes uint64
	MemoryLimitBytes uint64
	// DiskUsedBytes and DiskTotalBytes describe the writable layer.
	DiskUsedBytes  uint64
	DiskTotalBytes uint64
}

// UsageReader reads a running sandbox's resource use.
type UsageReader interface {
	Usage(ctx context.Context, id string) (Usage, error)
}

// AgentUsageReporter is a backend whose sandboxes' cgroups the daemon
// cannot read (they run on other machines, as pods): the controller asks
// the sandbox's agent instead, which reads the cgroup it runs in. Such
// figures come from inside the sandbox: fit to show, not to bill.
type AgentUsageReporter interface {
	UsageFromAgent()
}
