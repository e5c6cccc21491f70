package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ProcMem is one host process's memory.
type ProcMem struct {
	Pid  int    `json:"pid"`
	Comm string `json:"comm"`
	// RSSKiB counts every resident page the process maps, shared ones
	// (the static paddock binary's text, say) in full.
	RSSKiB int64 `json:"rss_kib"`
	// PSSKiB charges shared pages proportionally; summed over processes it
	// does not count a shared page twice.
	PSSKiB int64 `json:"pss_kib"`
}

// maxProcFile bounds reads of /proc files; the ones read here are a few KiB.
const maxProcFile = 64 << 10

// ReadProcMem reads pid's RSS and PSS from /proc.
func ReadProcMem(pid int) (ProcMem, error) {
	pm := ProcMem{Pid: pid}
	status, err := readBounded(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pm, err
	}
	if pm.RSSKiB, err = parseKiBField(status, "VmRSS:"); err != nil {
		// Kernel threads and zombies have no VmRSS; they hold no memory.
		pm.RSSKiB = 0
	}
	if v, err := parseStringField(status, "Name:"); err == nil {
		pm.Comm = v
	}
	// runsc re-executes itself through /proc/self/exe, so all its
	// processes are called "exe"; argv[0] says which one is which.
	if pm.Comm == "exe" {
		if cmdline, err := readBounded(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			if a0, _, _ := strings.Cut(string(cmdline), "\x00"); a0 != "" {
				pm.Comm = truncate(filepath.Base(a0), 32)
			}
		}
	}
	if rollup, err := readBounded(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		if v, err := parseKiBField(rollup, "Pss:"); err == nil {
			pm.PSSKiB = v
		}
	}
	return pm, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, maxProcFile)
	n, err := f.Read(buf)
	if n == 0 && err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// parseKiBField finds a line "<field> <n> kB" and returns n.
func parseKiBField(data []byte, field string) (int64, error) {
	v, err := parseStringField(data, field)
	if err != nil {
		return 0, err
	}
	num, unit, _ := strings.Cut(v, " ")
	if unit != "" && strings.TrimSpace(unit) != "kB" {
		return 0, fmt.Errorf("%s: unexpected unit %q", field, truncate(unit, 16))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return 0, fmt.Errorf("%s: bad value %q", field, truncate(num, 32))
	}
	return n, nil
}

// parseStringField finds a line starting with field and returns the rest,
// trimmed.
func parseStringField(data []byte, field string) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("field %s not found", field)
}

// procInfo is what the process scan needs of one process.
type procInfo struct {
	pid, ppid int
	argv      []string
}

// scanProcs lists every host process with its parent and argv.
func scanProcs() ([]procInfo, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		stat, err := readBounded(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		ppid, ok := parseStatPPid(stat)
		if !ok {
			continue
		}
		cmdline, _ := readBounded(filepath.Join("/proc", e.Name(), "cmdline"))
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		out = append(out, procInfo{pid: pid, ppid: ppid, argv: argv})
	}
	return out, nil
}

// parseStatPPid reads the parent pid from /proc/<pid>/stat, whose second
// field (the command name) may itself contain spaces and parentheses.
func parseStatPPid(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil || ppid < 0 {
		return 0, false
	}
	return ppid, true
}

// CgroupProcs returns the pids in the memory cgroup of pid (cgroup v1's
// memory hierarchy, or the v2 unified one): with runc, every process of
// the container and nothing else.
func CgroupProcs(pid int) ([]int, error) {
	data, err := readBounded(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	dir, err := memoryCgroupDir(data)
	if err != nil {
		return nil, err
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(procs)) {
		if p, err := strconv.Atoi(f); err == nil && p > 0 {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// memoryCgroupDir maps a /proc/<pid>/cgroup file to the host directory of
// its memory cgroup.
func memoryCgroupDir(data []byte) (string, error) {
	var unified string
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		if !strings.HasPrefix(path, "/") || strings.Contains(path, "..") {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", path), nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = filepath.Join("/sys/fs/cgroup", path)
		}
	}
	if unified != "" {
		return unified, nil
	}
	return "", fmt.Errorf("no memory cgroup found")
}

// RunscProcs returns every host process gVisor keeps for sandbox id: the
// runsc processes whose command line names it (sandbox, gofer), the pid
// runsc reports for it, and all their descendants (ptrace stubs).
func RunscProcs(id string, statePid int) ([]int, error) {
	procs, err := scanProcs()
	if err != nil {
		return nil, err
	}
	roots := map[int]bool{}
	if statePid > 0 {
		roots[statePid] = true
	}
	for _, p := range procs {
		if len(p.argv) == 0 || !strings.HasPrefix(filepath.Base(p.argv[0]), "runsc") {
			continue
		}
		for _, a := range p.argv[1:] {
			if a == id || strings.Contains(a, "/"+id+"/") || strings.HasSuffix(a, "/"+id) || strings.HasSuffix(a, "="+id) {
				roots[p.pid] = true
				break
			}
		}
	}
	return withDescendants(procs, roots), nil
}

// Descendants returns pid and every process below it.
func Descendants(pid int) ([]int, error) {
	procs, err := scanProcs()
	if err != nil {
		return nil, err
	}
	return withDescendants(procs, map[int]bool{pid: true}), nil
}

func withDescendants(procs []procInfo, set map[int]bool) []int {
	for changed := true; changed; {
		changed = false
		for _, p := range procs {
			if !set[p.pid] && set[p.ppid] {
				set[p.pid] = true
				changed = true
			}
		}
	}
	out := make([]int, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// stubName labels gVisor's ptrace stubs, which runsc starts through
// /proc/self/exe and so show up as "exe".
const stubName = "ptrace stub"

// SumMem reads and adds up the memory of pids; processes that vanished
// meanwhile are skipped.
func SumMem(pids []int) (rss, pss int64, procs []ProcMem) {
	for _, p := range pids {
		pm, err := ReadProcMem(p)
		if err != nil {
			continue
		}
		rss += pm.RSSKiB
		pss += pm.PSSKiB
		procs = append(procs, pm)
	}
	return rss, pss, procs
}
