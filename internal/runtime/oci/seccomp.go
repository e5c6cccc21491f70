package oci

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// deniedSyscalls return EPERM. The profile allows by default: sandboxes
// run arbitrary developer tooling, and an allowlist that misses a new
// syscall breaks programs in ways users cannot diagnose. What is denied is
// the kernel's administrative and historically exploitable surface, most
// of which the dropped capabilities already forbid; the filter is the
// second wall, and it also holds where a capability check has a bug.
var deniedSyscalls = []struct {
	names []string
	why   string
}{
	{[]string{"mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"},
		"the sandbox's filesystem layout is fixed by its config; new mounts could hide or expose host paths"},
	{[]string{"kexec_load", "kexec_file_load"}, "loads a new kernel"},
	{[]string{"init_module", "finit_module", "delete_module", "create_module"}, "kernel modules run in ring 0"},
	{[]string{"bpf"}, "eBPF verifier bugs are a recurring path to kernel code execution"},
	{[]string{"perf_event_open"}, "exposes host-wide performance data and has a long CVE history"},
	{[]string{"keyctl", "add_key", "request_key"}, "the kernel keyring is not namespaced: keys would be shared with the host"},
	{[]string{"unshare", "setns"}, "new namespaces (user namespaces above all) open kernel surface meant for root"},
	{[]string{"reboot"}, "would act on the host under runc"},
	{[]string{"swapon", "swapoff"}, "host memory configuration"},
	{[]string{"syslog"}, "the kernel log leaks host addresses and other tenants' messages"},
	{[]string{"settimeofday", "stime", "clock_settime", "clock_adjtime"}, "the clock is not namespaced"},
	{[]string{"acct", "quotactl", "quotactl_fd"}, "host accounting and quota administration"},
	{[]string{"open_by_handle_at", "name_to_handle_at"}, "file handles can reach files outside the container's root (the 'shocker' escape)"},
	{[]string{"userfaultfd"}, "used to stall the kernel mid-copy and widen race windows in exploits"},
	{[]string{"iopl", "ioperm"}, "raw I/O port access"},
	{[]string{"lookup_dcookie", "uselib", "ustat", "sysfs", "vm86", "vm86old", "nfsservctl"}, "obsolete interfaces nothing modern needs"},
	{[]string{"ptrace", "process_vm_readv", "process_vm_writev"},
		"the agent is PID 1 and root; tracing or reading its memory would let any root process in the sandbox take it over"},
	{[]string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, "a large, young kernel surface with repeated privilege escalations"},
}

// personality is allowed: tools such as setarch and uname query or set
// execution domains for their own process only, and a deny breaks them.

// namespaceCloneFlags may not be passed to clone: they create namespaces,
// the same surface as unshare.
var namespaceCloneFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
}

// defaultSeccomp returns the sandbox's seccomp profile.
func defaultSeccomp() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	sc := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32, specs.ArchAARCH64},
	}
	for _, d := range deniedSyscalls {
		sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{
			Names: append([]string(nil), d.names...), Action: specs.ActErrno, ErrnoRet: &eperm,
		})
	}
	// clone's flags are its first argument on every architecture listed.
	for _, f := range namespaceCloneFlags {
		sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: f, ValueTwo: f, Op: specs.OpMaskedEqual}},
		})
	}
	// clone3 passes its flags in memory, where a filter cannot look.
	// ENOSYS makes libc fall back to clone, whose flags are checked above.
	sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{
		Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys,
	})
	return sc
}
