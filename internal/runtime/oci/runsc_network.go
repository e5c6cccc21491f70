package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/paddock-dev/paddock/internal/errdefs"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// runsc's --network values Paddock uses. "none" gives the sandbox gVisor's
// netstack with loopback only; "sandbox" has gVisor take over the
// interfaces, addresses and routes of the network namespace the bundle
// names (the egress veth Paddock prepared), so its packets leave through
// that veth and meet the same host firewall as runc's.
const (
	runscNetNone    = "none"
	runscNetSandbox = "sandbox"
)

// runscNetworkArgs are the network flags for one runsc invocation.
func (r *Runtime) runscNetworkArgs(args []string) []string {
	// runsc's flags are global to an invocation, and a container's later
	// commands (start, state, kill, pause, delete) must carry the flags it
	// was created with. The bundle's config.json is the record, read each
	// time (it is small), so a restarted daemon drives the container the
	// same way.
	mode := runscNetNone
	if id := containerArg(args); id != "" {
		if m, ok := bundleNetworkMode(r.layout(id).config); ok {
			mode = m
		}
	}
	// runsc's offload defaults stay: downloads through the proxy measured
	// the same with host GSO on and off (about 100 MB/s on a loaded
	// 2-core machine, ptrace platform).
	return []string{"--network=" + mode}
}

// bundleNetworkMode says whether a bundle joins a prepared network
// namespace (egress) or has a fresh one (none).
func bundleNetworkMode(configPath string) (string, bool) {
	path, ok := bundleNetNSPath(configPath)
	switch {
	case !ok:
		return "", false
	case path != "":
		return runscNetSandbox, true
	}
	return runscNetNone, true
}

// bundleNetNSPath is the network namespace path a bundle's config names
// ("" for a new namespace); ok is false without a readable config.
func bundleNetNSPath(configPath string) (path string, ok bool) {
	b, err := os.ReadFile(configPath)
	if err != nil {
		return "", false
	}
	var cfg struct {
		Linux *struct {
			Namespaces []specs.LinuxNamespace `json:"namespaces"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.Linux == nil {
		return "", false
	}
	for _, ns := range cfg.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			return ns.Path, true
		}
	}
	return "", true
}

// valueFlags are the runtime command flags Paddock passes that take a
// separate value argument.
var valueFlags = map[string]bool{"--bundle": true, "-b": true, "--format": true, "-f": true, "--pid-file": true, "--console-socket": true, "--image-path": true}

// containerArg finds the container id in a runtime command line
// (`<op> [flags] <id> [more]`), or "" for commands without one (list).
func containerArg(args []string) string {
	if len(args) < 2 {
		return ""
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			if valueFlags[a] {
				i++
			}
			continue
		}
		if validID(a) {
			return a
		}
		return ""
	}
	return ""
}

// commandLine is the program and argv that run one runtime command.
//
// runsc releases before 2023 refuse --network=sandbox when
// /proc/sys/net/core/rmem_default is visible from the namespace they are
// about to take over: they take it as the sign of the host's own
// namespace. Kernels since 6.x show that file in every network namespace,
// so on them such a runsc refuses every prepared namespace. The check
// runs in the short-lived `runsc start` that sets up the sandbox's
// network; Paddock makes the same check itself, soundly (the namespace is
// not the host's), and runs that one command in a private mount namespace
// where /proc/sys/net/core is an empty directory. The sandbox's own
// processes were made by create, outside it. Releases from 2023 on (the
// pinned build: no rmem_default check left in runsc) run unwrapped.
func (r *Runtime) commandLine(ctx context.Context, args []string) (string, []string, error) {
	full := append(r.globalArgs(args), args...)
	if r.kind != KindRunsc || len(args) == 0 || (args[0] != "start" && args[0] != "create" && args[0] != "restore") {
		return r.bin, full, nil
	}
	id := containerArg(args)
	if id == "" {
		return r.bin, full, nil
	}
	path, ok := bundleNetNSPath(r.layout(id).config)
	if !ok || path == "" {
		return r.bin, full, nil
	}
	if err := checkNotHostNetNS(path); err != nil {
		return "", nil, err
	}
	if args[0] == "create" || args[0] == "restore" {
		if err := handOverNetNS(ctx, path, filepath.Join(r.sandboxDir(id), netnsRecordName)); err != nil {
			return "", nil, err
		}
		return r.bin, full, nil
	}
	unshare := unshareBin()
	if unshare == "" || !r.runscPre2023 {
		return r.bin, full, nil
	}
	wrapped := []string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c",
		`mount -t tmpfs -o size=4k,mode=0555,nosuid,nodev,noexec paddock-netns /proc/sys/net && exec "$0" "$@"`,
		r.bin}
	return unshare, append(wrapped, full...), nil
}

// unshareBin is util-linux's unshare, or "" where it is missing.
var unshareBin = sync.OnceValue(func() string {
	p, _ := exec.LookPath("unshare")
	return p
})

// checkNotHostNetNS refuses a namespace path that is the host's network
// namespace (or this process's): handing it to --network=sandbox would
// give the sandbox the host's interfaces.
func checkNotHostNetNS(path string) error {
	var ns syscall.Stat_t
	if err := syscall.Stat(path, &ns); err != nil {
		return fmt.Errorf("oci: sandbox network namespace: %w", errdefs.ErrFailedPrecondition)
	}
	for _, self := range []string{"/proc/1/ns/net", "/proc/self/ns/net"} {
		var st syscall.Stat_t
		if err := syscall.Stat(self, &st); err != nil {
			continue
		}
		if st.Dev == ns.Dev && st.Ino == ns.Ino {
			return fmt.Errorf("oci: the sandbox's network namespace is the host's: %w", errdefs.ErrFailedPrecondition)
		}
	}
	return nil
}
