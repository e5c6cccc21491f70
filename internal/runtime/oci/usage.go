package oci

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

var _ runtime.UsageReader = (*Runtime)(nil)

// maxCgroupFile bounds what is read of one cgroup file; they are small,
// but a wrong path must not make the daemon read something huge.
const maxCgroupFile = 64 << 10

// Usage reads the sandbox's cgroup (v2, or v1's cpuacct and memory
// hierarchies) and the statfs of its writable layer. The files read are
// the kernel's, under cgroupfs, which a sandbox cannot replace.
func (r *Runtime) Usage(ctx context.Context, id string) (runtime.Usage, error) {
	if err := checkID(id); err != nil {
		return runtime.Usage{}, err
	}
	var u runtime.Usage
	var err error
	if r.host.cgroupV2 {
		u, err = r.usageV2(id)
	} else {
		u, err = r.usageV1(id)
	}
	if err != nil {
		return runtime.Usage{}, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(r.layout(id).scratch, &st); err == nil {
		bs := uint64(st.Bsize)
		u.DiskTotalBytes = st.Blocks * bs
		u.DiskUsedBytes = (st.Blocks - st.Bfree) * bs
	}
	return u, nil
}

func (r *Runtime) usageV2(id string) (runtime.Usage, error) {
	dir := filepath.Join(cgroupRoot, r.cgroupParent, id)
	var u runtime.Usage
	cpu, err := readKeyed(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return u, usageErr(id, err)
	}
	u.CPUNanos = cpu["usage_usec"] * 1000
	if u.MemoryBytes, err = readUint(filepath.Join(dir, "memory.current")); err != nil {
		return u, usageErr(id, err)
	}
	u.MemoryLimitBytes, _ = readUint(filepath.Join(dir, "memory.max")) // "max" reads as 0: no limit
	if mem, err := readKeyed(filepath.Join(dir, "memory.stat")); err == nil {
		u.MemoryCacheBytes = mem["file"]
	}
	return u, nil
}

func (r *Runtime) usageV1(id string) (runtime.Usage, error) {
	var u runtime.Usage
	var err error
	cpuDir := filepath.Join(cgroupRoot, "cpuacct", r.cgroupParent, id)
	if _, serr := os.Stat(cpuDir); serr != nil {
		cpuDir = filepath.Join(cgroupRoot, "cpu,cpuacct", r.cgroupParent, id)
	}
	if u.CPUNanos, err = readUint(filepath.Join(cpuDir, "cpuacct.usage")); err != nil {
		return u, usageErr(id, err)
	}
	memDir := filepath.Join(cgroupRoot, "memory", r.cgroupParent, id)
	if u.MemoryBytes, err = readUint(filepath.Join(memDir, "memory.usage_in_bytes")); err != nil {
		return u, usageErr(id, err)
	}
	u.MemoryLimitBytes, _ = readUint(filepath.Join(memDir, "memory.limit_in_bytes"))
	if mem, err := readKeyed(filepath.Join(memDir, "memory.stat")); err == nil {
		u.MemoryCacheBytes = mem["total_cache"]
	}
	return u, nil
}

func usageErr(id string, err error) error {
	if os.IsNotExist(err) {
		return fmt.Errorf("sandbox %s has no cgroup (is it running?): %w", id, errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("read usage of sandbox %s: %w", id, err)
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxCgroupFile)
	n, err := f.Read(b)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

// readUint parses a one-number cgroup file; "max" is 0 (no limit).
func readUint(path string) (uint64, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// readKeyed parses "key value" lines (cpu.stat, memory.stat).
func readKeyed(path string) (map[string]uint64, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
