package osproc

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Bounds on what the agent reads of /proc. Every byte there about another
// process is chosen, in part, by that process (its name, its arguments),
// so each read is bounded and each parse distrustful.
const (
	MaxStatBytes   = 4 << 10
	MaxStatusBytes = 16 << 10
	// maxProcEntries bounds the directory entries of /proc looked at:
	// pids plus the few dozen named entries.
	maxProcEntries = 1 << 17
	// maxCommBytes is generous: Linux keeps 15 bytes of a name.
	maxCommBytes = 64
	// ClockTicks is USER_HZ, the unit of /proc/PID/stat's start time: 100
	// on every architecture Linux and gVisor run on.
	ClockTicks = 100
)

// Stat is what the agent uses of /proc/PID/stat.
type Stat struct {
	Pid, PPid  int
	Comm       string
	State      byte
	Threads    int
	StartTicks uint64 // clock ticks after boot
	RSSPages   int64
}

// ParseStat parses one /proc/PID/stat. The name field is the process's
// own choice (prctl PR_SET_NAME, or its executable's file name) and may
// hold spaces and parentheses, as in "12 () ( x) S 1 ...": it runs from
// the first '(' to the LAST ')', and every other field comes after that.
func ParseStat(b []byte) (Stat, error) {
	var st Stat
	if len(b) > MaxStatBytes {
		return st, errdefs.Invalid("stat is %d bytes, longer than any the kernel writes", len(b))
	}
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return st, errdefs.Invalid("stat has no (name)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return st, errdefs.Invalid("stat has no valid pid")
	}
	comm := b[open+1 : end]
	if len(comm) > maxCommBytes {
		return st, errdefs.Invalid("stat's name is %d bytes", len(comm))
	}
	// After the name: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime vsize rss ...
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 22 || len(f[0]) != 1 {
		return st, errdefs.Invalid("stat has too few fields after the name")
	}
	st.Pid, st.Comm, st.State = pid, strings.ToValidUTF8(string(comm), "\uFFFD"), f[0][0]
	if st.PPid, err = strconv.Atoi(f[1]); err != nil || st.PPid < 0 {
		return st, errdefs.Invalid("stat has no valid ppid")
	}
	if st.Threads, err = strconv.Atoi(f[17]); err != nil || st.Threads < 0 {
		return st, errdefs.Invalid("stat has no valid thread count")
	}
	if st.StartTicks, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return st, errdefs.Invalid("stat has no valid start time")
	}
	if st.RSSPages, err = strconv.ParseInt(f[21], 10, 64); err != nil {
		return st, errdefs.Invalid("stat has no valid rss")
	}
	st.RSSPages = max(st.RSSPages, 0)
	return st, nil
}

// ParseStatusUID returns the real uid of a /proc/PID/status.
func ParseStatusUID(b []byte) (uint32, bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(f[0], 10, 32)
		return uint32(n), err == nil
	}
	return 0, false
}

// ParseCmdline splits a /proc/PID/cmdline read of at most limit+1 bytes
// into arguments; truncated says the command line went on past limit.
func ParseCmdline(b []byte, limit int) (args []string, truncated bool) {
	if len(b) > limit {
		b, truncated = b[:limit], true
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, truncated
	}
	for a := range bytes.SplitSeq(b, []byte{0}) {
		args = append(args, strings.ToValidUTF8(string(a), "\uFFFD"))
	}
	return args, truncated
}

// ParseUptime returns the seconds since boot of /proc/uptime.
func ParseUptime(b []byte) (float64, bool) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil && v >= 0
}

// ReadBounded reads at most limit bytes of a /proc file. O_NONBLOCK
// keeps anything but a procfs file (a FIFO) from holding the agent.
func ReadBounded(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// Pids lists the numeric entries of procRoot, at most maxProcEntries
// looked at.
func Pids(procRoot string) ([]int, error) {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var pids []int
	for seen := 0; seen < maxProcEntries; {
		names, err := d.Readdirnames(1024)
		seen += len(names)
		for _, n := range names {
			if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			break
		}
		if err != nil {
			return pids, err
		}
	}
	return pids, nil
}

// All reads every process under procRoot (the procfs mount, "/proc"),
// each entry bounded and parsed by ParseStat. Unreadable entries are
// processes that ended meanwhile and are skipped.
func All(procRoot string) []Stat {
	pids, _ := Pids(procRoot)
	out := make([]Stat, 0, len(pids))
	for _, pid := range pids {
		b, err := ReadBounded(procRoot+"/"+strconv.Itoa(pid)+"/stat", MaxStatBytes+1)
		if err != nil {
			continue
		}
		st, err := ParseStat(b)
		if err != nil || st.Pid != pid {
			continue
		}
		out = append(out, st)
	}
	return out
}

// Below returns the processes of list below pid: its children, theirs,
// and so on (pid itself not included).
func Below(list []Stat, pid int) map[int]bool {
	children := map[int][]int{}
	for _, st := range list {
		children[st.PPid] = append(children[st.PPid], st.Pid)
	}
	out := map[int]bool{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !out[c] && c != pid {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}
