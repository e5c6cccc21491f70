package oci

import (
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// Paths inside the sandbox.
const (
	agentPathInSandbox = "/.paddock/bin/paddock"
	runDirInSandbox    = "/.paddock/run"
	agentSocketName    = "agent.sock"
	defaultPath        = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	nofileCeiling      = 65536
	cfsPeriod          = 100000
	// agentOOMScoreAdj makes the agent the kernel OOM killer's last
	// choice in its memory cgroup: a sandbox out of memory loses a user
	// process, not its PID 1. Not -1000 (never killed): processes inherit
	// the floor and could then make a cgroup nothing can be freed from.
	// The agent starts its children back at 0 (internal/agent/reaper.go).
	// Set only where the daemon may lower a score (CAP_SYS_RESOURCE).
	agentOOMScoreAdj = -998
)

// capabilities are what the agent (root in the sandbox) keeps: enough to
// run package managers and switch to the unprivileged user, nothing that
// reaches the kernel's administrative surface.
var capabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_NET_BIND_SERVICE", "CAP_SETPCAP", "CAP_SYS_CHROOT",
}

var maskedPaths = []string{
	"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
	"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	"/sys/devices/virtual/powercap",
}

var readonlyPaths = []string{
	"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// bundlePaths are the host paths the config refers to.
type bundlePaths struct {
	rootfs      string
	runDir      string
	agentBinary string
	// idBase is the first host id of the sandbox's user namespace (its
	// root); 0: no user namespace (userns.go).
	idBase uint32
	// sysfs, if set, is a sysfs mounted for the sandbox's network
	// namespace, bound at /sys instead of a mount of its own.
	sysfs string
}

// buildSpec turns a validated Spec into the container's OCI config.
func (r *Runtime) buildSpec(spec runtime.Spec, p bundlePaths) *specs.Spec {
	env := make([]string, 0, len(spec.AllEnv())+1)
	hasPath := false
	for _, kv := range spec.AllEnv() {
		if strings.HasPrefix(kv, "PATH=") {
			hasPath = true
		}
		env = append(env, kv)
	}
	if !hasPath {
		env = append(env, defaultPath)
	}
	nofile := min(r.host.nofileHard, nofileCeiling)
	caps := append([]string(nil), capabilities...)

	s := &specs.Spec{
		// runc 1.1 and runsc of its time speak spec 1.0.2; nothing newer is used.
		Version: "1.0.2",
		Process: &specs.Process{
			Args: []string{agentPathInSandbox, "agent", "--socket", runDirInSandbox + "/" + agentSocketName},
			Env:  env,
			Cwd:  "/",
			User: specs.User{UID: 0, GID: 0},
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: caps,
				Permitted: caps,
			},
			// Setuid programs work, so the default user has sudo as on
			// E2B: root in a sandbox is no more than the user there
			// (docs/security.md), and a setuid program gains at most the
			// capabilities above, which bound every process of the sandbox.
			NoNewPrivileges: false,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Soft: nofile, Hard: nofile},
				{Type: "RLIMIT_CORE", Soft: 0, Hard: 0},
			},
		},
		Root:     &specs.Root{Path: p.rootfs, Readonly: false},
		Hostname: spec.ID,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			{Destination: agentPathInSandbox, Type: "bind", Source: p.agentBinary, Options: []string{"bind", "ro", "nosuid", "nodev"}},
			{Destination: runDirInSandbox, Type: "bind", Source: p.runDir, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/" + r.cgroupParent + "/" + spec.ID,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				// A new, empty network namespace has only loopback.
				{Type: specs.NetworkNamespace},
			},
			MaskedPaths:   append([]string(nil), maskedPaths...),
			ReadonlyPaths: append([]string(nil), readonlyPaths...),
			Seccomp:       r.seccompProfile(), // runsc_seccomp.go
			Resources:     r.resources(spec.Resources),
		},
	}
	// Under gVisor the namespace would be the sentry's, and with one the
	// pinned runsc's sentry crashes on write-control (a nil file in its
	// cgroup v2 delegation check, checked), which sets the pids limit
	// (runsc_pids.go); without it the sandbox sees the sentry's cgroup
	// tree, which holds its own container alone.
	if r.host.cgroupNS && !r.pidsInside {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	if r.host.lowerOOMScore {
		adj := agentOOMScoreAdj
		s.Process.OOMScoreAdj = &adj
	}
	applyNetwork(s, spec)
	if p.idBase != 0 {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: p.idBase, Size: usernsSize}}
		s.Linux.UIDMappings, s.Linux.GIDMappings = m, append([]specs.LinuxIDMapping(nil), m...)
	}
	if p.sysfs != "" {
		for i, m := range s.Mounts {
			if m.Destination == "/sys" {
				s.Mounts[i] = specs.Mount{Destination: "/sys", Type: "bind", Source: p.sysfs, Options: []string{"rbind", "ro", "nosuid", "noexec", "nodev"}}
			}
		}
	}
	return s
}

func (r *Runtime) resources(res runtime.Resources) *specs.LinuxResources {
	quota := res.CPUMillis * cfsPeriod / 1000
	period := uint64(cfsPeriod)
	mem := res.MemoryBytes
	out := &specs.LinuxResources{
		Devices: allowedDevices(),
		CPU:     &specs.LinuxCPU{Quota: &quota, Period: &period},
		Memory:  &specs.LinuxMemory{Limit: &mem},
	}
	// Swap equal to the limit means "no swap" (v1 memsw counts memory
	// plus swap); where the kernel does not account swap, setting it
	// would fail the create.
	if r.host.swapAccounting {
		swap := mem
		out.Memory.Swap = &swap
	}
	if res.Pids > 0 {
		pids := res.Pids
		if r.kind == KindRunsc {
			pids = runscPidsLimit(pids)
		}
		out.Pids = &specs.LinuxPids{Limit: &pids}
	}
	return out
}

// allowedDevices denies every device, then allows the standard set a
// process expects to find in /dev.
func allowedDevices() []specs.LinuxDeviceCgroup {
	c := func(major, minor int64) specs.LinuxDeviceCgroup {
		d := specs.LinuxDeviceCgroup{Allow: true, Type: "c", Access: "rwm", Major: &major}
		if minor >= 0 {
			d.Minor = &minor
		}
		return d
	}
	return []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		c(1, 3),    // null
		c(1, 5),    // zero
		c(1, 7),    // full
		c(1, 8),    // random
		c(1, 9),    // urandom
		c(5, 0),    // tty
		c(5, 2),    // ptmx
		c(136, -1), // pts/*
	}
}

// runscPidsLimit is the host pids limit for a gVisor sandbox. The host
// cgroup holds the sentry and gofer, not the sandbox's processes: with the
// ptrace platform each guest process costs about nine host tasks (stub
// processes and sentry threads, kept for reuse after it exits), an idle
// sandbox uses about 40, and running out crashes the sentry, i.e. the
// whole sandbox. The limit itself is enforced inside gVisor where the
// runsc can (runsc_pids.go; Debian's cannot), so the host limit is a
// backstop that scales with the requested limit, not the limit itself.
func runscPidsLimit(pids int64) int64 {
	return pids*16 + 512
}
