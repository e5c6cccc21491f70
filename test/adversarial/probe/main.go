// Command probe tries, from inside a sandbox, the ways out that a hostile
// tenant would try, and prints one JSON line per probe: "blocked" when the
// kernel (or gVisor) refused, "open" when the attempt got through. It is a
// static binary with no tools of the image under it, so a probe can never
// pass because a tool is missing; every probe can also report "open", which
// the suite proves by running the same binary on the host (-control), where
// the harmless ones get through.
//
// Probes never do damage when they get through: a write-probe opens for
// writing and closes without writing, a mount is unmounted at once, a
// device node made is removed. The metadata probe is not run with
// -control: it would send a packet off the machine.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// result is one probe's outcome.
type result struct {
	Probe   string `json:"probe"`
	Outcome string `json:"outcome"` // "blocked", "open" or "skipped"
	Detail  string `json:"detail"`
}

type config struct {
	control    bool
	agentPath  string
	stateDir   string
	marker     string // a file name the host or another sandbox holds
	canaryA    string // the canary is canaryA+canaryB, never whole in argv
	canaryB    string
	kvmPath    string
	daemonSock string
	walkRoot   string
	sysrqPath  string
	kcorePath  string
}

// inherited are the descriptors this process got from whoever started it.
var inherited = inheritedFDs()

func main() {
	if len(os.Args) > 1 && os.Args[1] == "noop" { // the unshare probe's child
		return
	}
	var c config
	flag.BoolVar(&c.control, "control", false, "running on the host, to prove the probes can report open")
	flag.StringVar(&c.agentPath, "agent", "/.paddock/bin/paddock", "the agent binary's path")
	flag.StringVar(&c.stateDir, "state-dir", "", "the daemon's state directory on the host")
	flag.StringVar(&c.marker, "marker", "", "a file name that exists only outside this sandbox")
	flag.StringVar(&c.canaryA, "canary-a", "", "first half of a secret held outside this sandbox")
	flag.StringVar(&c.canaryB, "canary-b", "", "second half")
	flag.StringVar(&c.kvmPath, "kvm", "/dev/kvm", "the KVM device's path")
	flag.StringVar(&c.daemonSock, "daemon-socket", "/run/paddock/paddock.sock", "the daemon's API socket on the host")
	flag.StringVar(&c.sysrqPath, "sysrq", "/proc/sysrq-trigger", "the magic SysRq trigger's path")
	flag.StringVar(&c.kcorePath, "kcore", "/proc/kcore", "the kernel memory image's path")
	flag.StringVar(&c.walkRoot, "walk-root", "/", "where the search for the marker starts")
	flag.Parse()

	probes := []struct {
		name string
		fn   func(config) (bool, string)
	}{
		{"mount", probeMount},
		{"unshare-user", func(config) (bool, string) { return probeClone(unix.CLONE_NEWUSER) }},
		{"unshare-mount-net", func(config) (bool, string) { return probeClone(unix.CLONE_NEWNS | unix.CLONE_NEWNET) }},
		{"sysrq-trigger", func(c config) (bool, string) { return probeOpenWrite(c.sysrqPath) }},
		{"core-pattern", func(config) (bool, string) { return probeOpenWrite("/proc/sys/kernel/core_pattern") }},
		{"sysctl", func(config) (bool, string) { return probeOpenWrite("/proc/sys/vm/drop_caches") }},
		{"cgroup-write", probeCgroupWrite},
		{"kcore", func(c config) (bool, string) { return probeRead(c.kcorePath) }},
		{"kernel-log", probeKernelLog},
		{"kvm", func(c config) (bool, string) { return probeOpenRW(c.kvmPath) }},
		{"dev-mem", func(config) (bool, string) { return probeOpenRW("/dev/mem") }},
		{"block-devices", probeBlockDevices},
		{"mknod-block", probeMknod},
		{"raw-socket", probeRawSocket},
		{"bpf", probeBPF},
		{"ptrace-agent", probePtrace},
		{"agent-binary", probeAgentBinary},
		{"daemon-socket", probeDaemonSocket},
		{"daemon-files", probeStateDir},
		{"fd-leak", probeFDs},
		{"env-secret", probeCanary},
		{"other-files", probeMarker},
		{"metadata-address", probeMetadata},
	}
	enc := json.NewEncoder(os.Stdout)
	for _, p := range probes {
		if p.name == "metadata-address" && c.control {
			_ = enc.Encode(result{p.name, "skipped", "not run on the host: it would leave the machine"})
			continue
		}
		open, detail := p.fn(c)
		out := "blocked"
		if open {
			out = "open"
		}
		_ = enc.Encode(result{p.name, out, detail})
	}
}

func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno) + ": " + errno.Error()
	}
	return err.Error()
}

func probeMount(config) (bool, string) {
	dir, err := os.MkdirTemp("", "probe-mnt")
	if err != nil {
		return false, "no temporary directory: " + err.Error()
	}
	defer os.Remove(dir)
	if err := unix.Mount("probe", dir, "tmpfs", 0, "size=1m"); err != nil {
		return false, "mount tmpfs: " + errText(err)
	}
	_ = unix.Unmount(dir, unix.MNT_DETACH)
	return true, "mounted a tmpfs at " + dir
}

// probeClone starts this binary again in new namespaces.
func probeClone(flags uintptr) (bool, string) {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	cmd := exec.Command(self, "noop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	if flags&unix.CLONE_NEWUSER != 0 {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	if err := cmd.Run(); err != nil {
		return false, "clone: " + errText(err)
	}
	return true, fmt.Sprintf("a child ran in new namespaces (flags %#x)", flags)
}

func probeOpenWrite(path string) (bool, string) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false, "open for writing: " + errText(err)
	}
	f.Close() // nothing written
	return true, path + " opened for writing"
}

func probeOpenRW(path string) (bool, string) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, "open: " + errText(err)
	}
	f.Close()
	return true, path + " opened read-write"
}

func probeRead(path string) (bool, string) {
	f, err := os.Open(path)
	if err != nil {
		return false, "open: " + errText(err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, err := f.Read(buf)
	if n == 0 {
		return false, fmt.Sprintf("read 0 bytes (%v)", err)
	}
	return true, fmt.Sprintf("read %d bytes of %s", n, path)
}

func probeCgroupWrite(config) (bool, string) {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max"} {
		if open, detail := probeOpenWrite(p); open {
			return true, detail
		}
	}
	return false, "no cgroup limit file opens for writing"
}

func probeKernelLog(config) (bool, string) {
	buf := make([]byte, 256)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil {
		return false, "syslog(READ_ALL): " + errText(err)
	}
	if n == 0 {
		return false, "syslog(READ_ALL) returned nothing"
	}
	return true, fmt.Sprintf("read %d bytes of the kernel log", n)
}

func probeBlockDevices(config) (bool, string) {
	var found []string
	_ = filepath.WalkDir("/dev", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeDevice == 0 || d.Type()&fs.ModeCharDevice != 0 {
			return nil
		}
		found = append(found, p)
		return nil
	})
	for _, p := range found {
		f, err := os.Open(p)
		if err == nil {
			f.Close()
			return true, "opened block device " + p
		}
	}
	if len(found) == 0 {
		return false, "no block devices in /dev"
	}
	return false, fmt.Sprintf("%d block devices, none opens", len(found))
}

func probeMknod(config) (bool, string) {
	dir, err := os.MkdirTemp("", "probe-dev")
	if err != nil {
		return false, "no temporary directory: " + err.Error()
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "blk")
	// 7,0 is loop0: a block device every kernel knows.
	if err := unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil {
		return false, "mknod: " + errText(err)
	}
	f, err := os.Open(p)
	if err != nil {
		return false, "made a block device node, but it does not open: " + errText(err)
	}
	f.Close()
	return true, "made and opened a block device node"
}

func probeRawSocket(config) (bool, string) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		return false, "raw socket: " + errText(err)
	}
	unix.Close(fd)
	return true, "opened a raw IP socket"
}

// probeBPF asks for a one-entry array map: the smallest thing bpf(2) makes.
func probeBPF(config) (bool, string) {
	attr := struct {
		mapType, keySize, valueSize, maxEntries, flags uint32
	}{2 /* BPF_MAP_TYPE_ARRAY */, 4, 4, 1, 0}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, 0 /* BPF_MAP_CREATE */, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return false, "bpf(MAP_CREATE): " + errText(errno)
	}
	unix.Close(int(fd))
	return true, "created a BPF map"
}

// probePtrace attaches to the agent (PID 1), or with -control to a child
// of its own (attaching to the host's init would stop it).
func probePtrace(c config) (bool, string) {
	pid := 1
	if c.control {
		cmd := exec.Command("sleep", "5")
		if err := cmd.Start(); err != nil {
			return false, "control child: " + err.Error()
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		pid = cmd.Process.Pid
	}
	if err := unix.PtraceSeize(pid); err != nil {
		return false, fmt.Sprintf("ptrace(SEIZE, %d): %s", pid, errText(err))
	}
	_ = unix.PtraceDetach(pid)
	return true, fmt.Sprintf("attached to pid %d", pid)
}

func probeAgentBinary(c config) (bool, string) {
	if open, detail := probeOpenWrite(c.agentPath); open {
		return true, detail
	}
	st, err := os.Stat(c.agentPath)
	if err != nil {
		return false, "stat: " + errText(err)
	}
	if err := os.Chmod(c.agentPath, st.Mode().Perm()); err == nil {
		return true, "chmod of the agent binary succeeded"
	}
	link := c.agentPath + ".probe"
	if err := os.Link(c.agentPath, link); err == nil {
		os.Remove(link)
		return true, "hard-linked the agent binary"
	}
	return false, "not writable, not chmod-able, not linkable"
}

func probeDaemonSocket(c config) (bool, string) {
	conn, err := net.DialTimeout("unix", c.daemonSock, time.Second)
	if err != nil {
		return false, "connect " + c.daemonSock + ": " + errText(err)
	}
	conn.Close()
	return true, "connected to " + c.daemonSock
}

func probeStateDir(c config) (bool, string) {
	if c.stateDir == "" {
		return false, "no state dir given"
	}
	for _, p := range []string{c.stateDir, filepath.Join(c.stateDir, "paddock.db")} {
		if _, err := os.Lstat(p); err == nil {
			return true, p + " is visible"
		}
	}
	return false, c.stateDir + " is not visible"
}

// probeFDs looks for descriptors that reach outside: any of its own beyond
// stdio and the one reading /proc, and any visible process's descriptor
// naming the daemon's state dir.
func probeFDs(c config) (bool, string) {
	if len(inherited) > 0 {
		return true, "inherited descriptors: " + strings.Join(inherited, ", ")
	}
	if c.stateDir == "" {
		return false, "no inherited descriptors"
	}
	procs, _ := os.ReadDir("/proc")
	seen := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, err := os.ReadDir("/proc/" + p.Name() + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink("/proc/" + p.Name() + "/fd/" + fd.Name())
			if err != nil {
				continue
			}
			seen++
			if strings.Contains(target, c.stateDir) || strings.HasSuffix(target, "paddock.db") {
				return true, fmt.Sprintf("pid %s fd %s -> %s", p.Name(), fd.Name(), target)
			}
		}
	}
	return false, fmt.Sprintf("%d visible descriptors, none reaches the daemon's files", seen)
}

// inheritedFDs lists the descriptors beyond stdio that came through exec:
// those without close-on-exec, as every descriptor that survives an exec
// is, while the Go runtime opens all of its own with it.
func inheritedFDs() []string {
	names, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return []string{"cannot list: " + err.Error()}
	}
	var out []string
	for _, e := range names {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n <= 2 {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue // closed meanwhile: the directory's own
		}
		var flags uint64
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ = strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			}
		}
		if flags&unix.O_CLOEXEC != 0 {
			continue
		}
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, fmt.Sprintf("%d->%s", n, target))
	}
	return out
}

// probeCanary searches every visible process's environment and command
// line for the secret; the probe's own argv holds only its halves.
func probeCanary(c config) (bool, string) {
	if c.canaryA == "" || c.canaryB == "" {
		return false, "no canary given"
	}
	canary := []byte(c.canaryA + c.canaryB)
	procs, _ := os.ReadDir("/proc")
	read := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil && p.Name() != "self" {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + p.Name() + "/" + f)
			if err != nil {
				continue
			}
			read++
			if bytes.Contains(b, canary) {
				return true, fmt.Sprintf("the secret is in /proc/%s/%s", p.Name(), f)
			}
		}
	}
	return false, fmt.Sprintf("not in the %d environments and command lines readable", read)
}

// probeMarker walks the visible filesystem for a file that exists only
// outside this sandbox (the host's temporary directory or another
// sandbox's home).
func probeMarker(c config) (bool, string) {
	if c.marker == "" {
		return false, "no marker given"
	}
	var found string
	walked := 0
	deadline := time.Now().Add(20 * time.Second)
	_ = filepath.WalkDir(c.walkRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (p == "/proc" || p == "/sys" || p == "/dev") {
			return filepath.SkipDir
		}
		walked++
		if d.Name() == c.marker {
			found = p
			return filepath.SkipAll
		}
		if time.Now().After(deadline) {
			return filepath.SkipAll
		}
		return nil
	})
	if found != "" {
		return true, "found " + found
	}
	return false, fmt.Sprintf("not among %d paths", walked)
}

// probeMetadata tries the cloud metadata address; a sandbox without a
// network has no route to it.
func probeMetadata(config) (bool, string) {
	conn, err := net.DialTimeout("tcp", "169.254.169.254:80", 2*time.Second)
	if err != nil {
		return false, "connect: " + errText(err)
	}
	conn.Close()
	return true, "connected to 169.254.169.254:80"
}
