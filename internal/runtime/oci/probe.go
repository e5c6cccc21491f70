package oci

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// KindCrun is crun, driven like runc. It needs a pure cgroup v2 host.
const KindCrun = "crun"

// Cgroup layouts CgroupLayout reports.
const (
	LayoutUnified = "unified"
	LayoutHybrid  = "hybrid"
	LayoutLegacy  = "legacy"
)

// CgroupLayout reads how this host mounts cgroups: "unified" when
// /sys/fs/cgroup is cgroup2, "hybrid" when v1 controllers sit beside a v2
// mount, "legacy" for v1 only.
func CgroupLayout() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return LayoutLegacy
	}
	defer f.Close()
	var v1, v2 bool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m, err := parseMountinfoLine(sc.Text())
		if err != nil || !strings.HasPrefix(m.mountPoint, cgroupRoot) {
			continue
		}
		switch m.fsType {
		case "cgroup2":
			if m.mountPoint == cgroupRoot {
				return LayoutUnified
			}
			v2 = true
		case "cgroup":
			v1 = true
		}
	}
	if v1 && v2 {
		return LayoutHybrid
	}
	return LayoutLegacy
}

// ProbeResult is what probing one runtime binary found.
type ProbeResult struct {
	Kind      string
	Path      string
	Version   string
	Available bool
	Reason    string
}

// probeTimeout bounds one probe; a wedged runtime must not hold up the
// daemon's start.
const probeTimeout = 15 * time.Second

// Probe checks that a runtime binary is installed and answers. For crun it
// also runs a throwaway container (the static agent binary printing its
// help, no network, no capabilities, read-only root) under scratchDir,
// because crun's refusals (cgroup layouts it does not support) only show
// when it creates one; runc and runsc are checked by New itself. bin is
// the executable, an absolute path or a name looked up in PATH; "" is kind.
func Probe(ctx context.Context, kind, bin, scratchDir, agentBinary string) ProbeResult {
	res := ProbeResult{Kind: kind}
	if bin == "" {
		bin = kind
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		if filepath.IsAbs(bin) {
			res.Reason = fmt.Sprintf("%s is not installed at %s", kind, bin)
		} else {
			res.Reason = fmt.Sprintf("%s is not installed (%s not found in PATH)", kind, bin)
		}
		return res
	}
	res.Path = path
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		res.Reason = fmt.Sprintf("%s --version failed: %s", kind, firstLine(out))
		return res
	}
	res.Version = firstLine(out)
	if kind != KindCrun {
		res.Available = true
		return res
	}
	if err := trialRun(ctx, path, scratchDir, agentBinary); err != nil {
		res.Reason = err.Error()
		if l := CgroupLayout(); l != LayoutUnified {
			res.Reason += fmt.Sprintf(" (this host's cgroup layout is %s; crun needs a pure cgroup v2 hierarchy)", l)
		}
		return res
	}
	res.Available = true
	return res
}

// trialRun creates, runs and deletes one minimal container.
func trialRun(ctx context.Context, bin, scratchDir, agentBinary string) error {
	if err := os.MkdirAll(scratchDir, 0o700); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	dir, err := os.MkdirTemp(scratchDir, "probe-")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer os.RemoveAll(dir)
	id := "paddock-probe-" + filepath.Base(dir)[len("probe-"):]
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	bundle := filepath.Join(dir, "bundle")
	if err := writeProbeBundle(bundle, id, agentBinary); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--root", state, "run", "--bundle", bundle, id)
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	// Whatever happened, nothing of the probe may outlive it.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = exec.CommandContext(dctx, bin, "--root", state, "delete", "--force", id).Run()
	if runErr != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = runErr.Error()
		}
		return fmt.Errorf("a test container did not run: %s", firstLine([]byte(msg)))
	}
	return nil
}

// probeArgs is what the probe container runs: the agent's help, which
// both the small agent (cmd/paddock-agent) and the whole paddock binary
// answer with exit status 0 and no side effect.
var probeArgs = []string{"/paddock", "agent", "--help"}

// probeUser is who the probe's process runs as: nobody, so the probe also
// proves an unprivileged user can reach the binary through the root.
const probeUser = 65534

// writeProbeBundle writes the probe container's bundle into dir (which must
// not exist): its config and a read-only root holding only the mountpoints
// the config names. The runtime cannot create mountpoints in a read-only
// root, so every one exists beforehand; crun also opens the root's /dev to
// populate it. The root is world-readable and traversable, since the
// process runs as nobody and must reach /paddock through it.
func writeProbeBundle(dir, id, agentBinary string) error {
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(rootfs, 0o700); err != nil {
		return err
	}
	spec := &specs.Spec{
		Version:  "1.0.2", // as the sandboxes' bundles say (spec.go); crun 1.8 refuses newer
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: "probe",
		Process: &specs.Process{
			Args: probeArgs,
			Env:  []string{defaultPath},
			Cwd:  "/",
			User: specs.User{UID: probeUser, GID: probeUser},
			// No capabilities at all: the probe only proves a container starts.
			Capabilities:    &specs.LinuxCapabilities{},
			NoNewPrivileges: true,
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/paddock", Type: "bind", Source: agentBinary, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/paddock-probe/" + id,
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: ptr(int64(128 << 20))},
				Pids:   &specs.LinuxPids{Limit: ptr(int64(32))},
			},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.NetworkNamespace},
			},
			MaskedPaths: maskedPaths,
		},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return err
	}
	for _, d := range []string{"dev", "proc"} {
		if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "paddock"), nil, 0o644); err != nil {
		return err
	}
	// MkdirAll's mode is filtered by the umask; set the root's explicitly.
	return os.Chmod(rootfs, 0o755)
}

func ptr[T any](v T) *T { return &v }
