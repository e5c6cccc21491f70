// Package cgroupstat reads a cgroup's CPU and memory figures from
// cgroupfs, v2 or v1. The daemon reads a local sandbox's cgroup from the
// host (internal/runtime/oci); the agent reads its own from inside a pod
// (the kubernetes backend has no host to read from). It imports only the
// standard library, so the agent may link it.
package cgroupstat

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Root is where cgroupfs is mounted, on a host and in a container.
const Root = "/sys/fs/cgroup"

// maxFile bounds what is read of one cgroup file; they are small, but a
// wrong path must not make the reader take something huge.
const maxFile = 64 << 10

// Reading is a cgroup's CPU time and memory at one moment.
type Reading struct {
	// CPUNanos is the CPU time the cgroup's tasks used since it was made.
	CPUNanos uint64
	// MemoryBytes is current use; MemoryCacheBytes the page cache in it;
	// MemoryLimitBytes the hard limit (0 if none).
	MemoryBytes      uint64
	MemoryCacheBytes uint64
	MemoryLimitBytes uint64
}

// IsV2 says whether root is a cgroup v2 (unified) mount.
func IsV2(root string) bool {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return err == nil
}

// V2 reads the cgroup v2 directory dir.
func V2(dir string) (Reading, error) {
	var r Reading
	cpu, err := readKeyed(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return r, err
	}
	r.CPUNanos = cpu["usage_usec"] * 1000
	if r.MemoryBytes, err = readUint(filepath.Join(dir, "memory.current")); err != nil {
		return r, err
	}
	r.MemoryLimitBytes, _ = readUint(filepath.Join(dir, "memory.max")) // "max" reads as 0: no limit
	if mem, err := readKeyed(filepath.Join(dir, "memory.stat")); err == nil {
		r.MemoryCacheBytes = mem["file"]
	}
	return r, nil
}

// V1 reads a cgroup of cgroup v1's cpuacct and memory hierarchies, named
// by its path below each hierarchy's mount under root.
func V1(root, path string) (Reading, error) {
	var r Reading
	var err error
	cpuDir := filepath.Join(root, "cpuacct", path)
	if _, serr := os.Stat(cpuDir); serr != nil {
		cpuDir = filepath.Join(root, "cpu,cpuacct", path)
	}
	if r.CPUNanos, err = readUint(filepath.Join(cpuDir, "cpuacct.usage")); err != nil {
		return r, err
	}
	memDir := filepath.Join(root, "memory", path)
	if r.MemoryBytes, err = readUint(filepath.Join(memDir, "memory.usage_in_bytes")); err != nil {
		return r, err
	}
	if r.MemoryLimitBytes, err = readUint(filepath.Join(memDir, "memory.limit_in_bytes")); err == nil && r.MemoryLimitBytes >= noLimitV1 {
		r.MemoryLimitBytes = 0
	}
	if mem, err := readKeyed(filepath.Join(memDir, "memory.stat")); err == nil {
		r.MemoryCacheBytes = mem["total_cache"]
	}
	return r, nil
}

// noLimitV1 is where cgroup v1's "no limit" starts: the kernel reports
// the largest page-aligned int64 (0x7FFFFFFFFFFFF000).
const noLimitV1 = 1 << 62

// Own reads the cgroup the calling process sees at Root: in a container
// with its own cgroup view (a pod's, under containerd and runc) that is
// the container's cgroup.
func Own() (Reading, error) {
	if IsV2(Root) {
		return V2(Root)
	}
	return V1(Root, "")
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile))
	if err == nil && len(b) == 0 {
		err = errors.New(path + " is empty")
	}
	return b, err
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
