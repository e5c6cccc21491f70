package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostInfo is what the sandbox configuration depends on about this host.
type hostInfo struct {
	cgroupV2       bool
	swapAccounting bool
	cgroupNS       bool
	nofileHard     uint64
	// lowerOOMScore: the runtime may give the agent a score below the
	// daemon's own (it needs CAP_SYS_RESOURCE, which a host in a
	// container often lacks). Without it the agent keeps the inherited
	// score and starts its children above it instead (internal/agent).
	lowerOOMScore bool
	// memCgroup is the memory controller's hierarchy, and oomFile the
	// file in a cgroup of it that counts OOM kills ("" if none).
	memCgroup, oomFile string
}

const cgroupRoot = "/sys/fs/cgroup"

func probeHost() (hostInfo, error) {
	var h hostInfo
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		h.cgroupV2 = true
	}
	if h.cgroupV2 {
		// The root cgroup has no swap files; any child shows whether
		// the kernel accounts swap.
		matches, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", "memory.swap.max"))
		h.swapAccounting = len(matches) > 0
	} else if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes")); err == nil {
		h.swapAccounting = true
	}
	if _, err := os.Stat("/proc/self/ns/cgroup"); err == nil {
		h.cgroupNS = true
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return h, fmt.Errorf("oci: getrlimit nofile: %w", err)
	}
	h.nofileHard = rl.Max
	h.lowerOOMScore = hasCapability(unix.CAP_SYS_RESOURCE)
	h.memCgroup, h.oomFile = memoryHierarchy()
	return h, nil
}

// mountEntry is the part of a /proc/self/mountinfo line we use.
type mountEntry struct {
	mountPoint string
	fsType     string
	source     string
	superOpts  string
}

// parseMountinfoLine parses one line of /proc/self/mountinfo. The format
// is "id parent maj:min root mountpoint opts [optional...] - fstype source superopts".
func parseMountinfoLine(line string) (mountEntry, error) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return mountEntry{}, errors.New("mountinfo: no separator")
	}
	f := strings.Fields(pre)
	if len(f) < 6 {
		return mountEntry{}, errors.New("mountinfo: short line")
	}
	p := strings.Fields(post)
	if len(p) < 2 {
		return mountEntry{}, errors.New("mountinfo: short fs fields")
	}
	e := mountEntry{mountPoint: unescapeMount(f[4]), fsType: p[0], source: unescapeMount(p[1])}
	if len(p) > 2 {
		e.superOpts = p[2]
	}
	return e, nil
}

// unescapeMount undoes the kernel's octal escaping (\040 for space etc.).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func readMounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("oci: read mountinfo: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		e, err := parseMountinfoLine(sc.Text())
		if err != nil {
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("oci: read mountinfo: %w", err)
	}
	return out, nil
}

// isMountPoint reports whether p is itself a mount point.
func isMountPoint(p string) (bool, error) {
	ms, err := readMounts()
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.mountPoint == p {
			return true, nil
		}
	}
	return false, nil
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	ms, err := readMounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.mountPoint == dir || strings.HasPrefix(m.mountPoint, dir+"/") {
			out = append(out, m.mountPoint)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// cgroupMounts returns the mount points of every cgroup hierarchy (v1
// controllers and named hierarchies, and the v2 unified tree).
func cgroupMounts() ([]string, error) {
	ms, err := readMounts()
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range ms {
		if (m.fsType == "cgroup" || m.fsType == "cgroup2") && !seen[m.mountPoint] {
			seen[m.mountPoint] = true
			out = append(out, m.mountPoint)
		}
	}
	return out, nil
}

// removeCgroup removes <hierarchy>/<parent>/<id> in every hierarchy,
// children first (cgroup directories only go away with rmdir).
func (r *Runtime) removeCgroup(id string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		dir := filepath.Join(m, r.cgroupParent, id)
		if err := rmdirTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("oci: remove cgroup of %s: %w", id, errors.Join(errs...))
	}
	return nil
}

// cgroupDirs lists the existing cgroup directories of a sandbox.
func (r *Runtime) cgroupDirs(id string) []string {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range mounts {
		dir := filepath.Join(m, r.cgroupParent, id)
		if _, err := os.Stat(dir); err == nil {
			out = append(out, dir)
		}
	}
	return out
}

func rmdirTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := rmdirTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("rmdir %s: %w", dir, err)
	}
	return nil
}

// hasCapability says whether this process has capability c in its
// effective set.
func hasCapability(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}

// memoryHierarchy finds where OOM kills are counted: the v1 memory
// hierarchy's memory.oom_control (also on hybrid hosts, where runc puts
// memory there), else the unified hierarchy's memory.events.
func memoryHierarchy() (dir, file string) {
	ms, err := readMounts()
	if err != nil {
		return "", ""
	}
	var v2 []string
	for _, m := range ms {
		switch m.fsType {
		case "cgroup":
			if slices.Contains(strings.Split(m.superOpts, ","), "memory") {
				return m.mountPoint, "memory.oom_control"
			}
		case "cgroup2":
			v2 = append(v2, m.mountPoint)
		}
	}
	if len(v2) == 1 {
		return v2[0], "memory.events"
	}
	return "", ""
}
