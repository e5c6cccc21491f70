// Package oci runs Paddock sandboxes with an OCI runtime's command line
// (runc, or gVisor's runsc). Each sandbox gets a bundle whose root
// filesystem is an overlay of the image's read-only layers and a writable
// layer kept on a size-capped, loop-mounted ext4 image, so that filling the
// disk hits ENOSPC inside the sandbox and nowhere else.
package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// Runtime kinds accepted in Options.Runtime.
const (
	KindRunc  = "runc"
	KindRunsc = "runsc"
)

// defaultCommandTimeout bounds one runtime command when the caller's
// context carries no deadline: a wedged runtime must not hang the daemon.
const defaultCommandTimeout = 60 * time.Second

// maxSocketPath is sun_path's size on Linux; the agent's socket must fit.
const maxSocketPath = 107

// typicalIDLen is the length of the ids the controller makes.
const typicalIDLen = 20

// Options configure a Runtime. Runtime is required; the rest have defaults.
type Options struct {
	// Runtime is "runc" or "runsc"; Name() reports "runc" or "gvisor".
	Runtime string
	// Binary is the runtime executable; default: Runtime looked up in PATH.
	Binary string
	// Root is this backend's state directory (created 0700).
	Root string
	// CgroupParent is the cgroup under which every sandbox's cgroup lives.
	CgroupParent string
	Logger       *slog.Logger
	// DiskPool is how many formatted disk images of each recently used
	// size are kept ready (diskpool.go); 0 formats each one at start.
	DiskPool int
	// Platform is gVisor's platform, systrap or ptrace; "" takes systrap
	// where the binary has it (runsc_platform.go). runsc only.
	Platform string
	// UserNamespaces is UsernsAuto ("" too: a user namespace for each runc
	// and crun sandbox where the host allows it) or UsernsOff (userns.go).
	UserNamespaces string
}

// Runtime drives one OCI runtime binary. It implements runtime.Backend,
// runtime.Pauser and runtime.LayerExporter.
type Runtime struct {
	kind         string
	bin          string
	version      string // the binary's own version ("v0.0.0-2026...", "release-20221219.0")
	root         string
	cgroupParent string
	log          *slog.Logger
	host         hostInfo
	disks        *diskPool // nil: no pool
	platform     string    // runsc: gVisor's platform
	pidsInside   bool      // runsc: pids limit enforced inside (runsc_pids.go)
	runscPre2023 bool      // runsc: a release before 2023 (no systrap), e.g. Debian 12's
	userns       usernsState
	usernsMu     sync.Mutex
	usernsCache  map[usernsKey]*os.File // userns.go
	freeSlots    []int                  // ranges given back lately, newest last
	restoreArgs  func() []string        // runsc: restore's flags this build has (checkpoint.go)
	started      startedPidfds          // pidfds of the containers it started, for Wait and signals (started.go)
}

var (
	_ runtime.Backend       = (*Runtime)(nil)
	_ runtime.Pauser        = (*Runtime)(nil)
	_ runtime.LayerExporter = (*Runtime)(nil)
)

// New checks the options, probes the runtime binary and creates Root.
func New(opts Options) (*Runtime, error) {
	if opts.Runtime != KindRunc && opts.Runtime != KindRunsc && opts.Runtime != KindCrun {
		return nil, errdefs.Invalid("oci: unknown runtime %q (want runc, runsc or crun)", opts.Runtime)
	}
	if opts.Root == "" || !filepath.IsAbs(opts.Root) {
		return nil, errdefs.Invalid("oci: state root must be an absolute path")
	}
	root := filepath.Clean(opts.Root)
	// The agent's socket lives at <root>/sandboxes/<id>/scratch/run/agent.sock
	// and must fit in sun_path for the controller's ids (Start checks the
	// actual id).
	if n := len(root) + len("/sandboxes/") + typicalIDLen + len("/scratch/run/agent.sock"); n > maxSocketPath {
		return nil, errdefs.Invalid("oci: state root %q is too long for unix socket paths", root)
	}
	parent := opts.CgroupParent
	if parent == "" {
		parent = "paddock"
	}
	if !validCgroupName(parent) {
		return nil, errdefs.Invalid("oci: invalid cgroup parent %q", parent)
	}
	bin := opts.Binary
	if bin == "" {
		p, err := exec.LookPath(opts.Runtime)
		if err != nil {
			return nil, fmt.Errorf("oci: %s not found in PATH: %w", opts.Runtime, errdefs.ErrUnavailable)
		}
		bin = p
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{
		kind:         opts.Runtime,
		bin:          bin,
		root:         root,
		cgroupParent: parent,
		log:          log.With("runtime", opts.Runtime),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("oci: %s --version failed: %s: %w", opts.Runtime, firstLine(out), errdefs.ErrUnavailable)
	}
	r.version = runtimeVersion(out)
	if opts.Runtime == KindRunsc {
		f := probeRunsc(ctx, bin)
		if r.platform, err = choosePlatform(opts.Platform, f.platforms); err != nil {
			return nil, err
		}
		r.pidsInside = f.cgroupV2Inside
		r.runscPre2023 = !slices.Contains(f.platforms, PlatformSystrap)
		r.restoreArgs = sync.OnceValue(func() []string { return probeRestoreArgs(bin) })
	}
	host, err := probeHost()
	if err != nil {
		return nil, err
	}
	r.host = host
	// With user namespaces (userns.go) the root and its sandboxes
	// directory become 0711: a sandbox's root passes through them to its
	// own directory, which only it and root may enter.
	for _, d := range []string{root, r.stateDir(), filepath.Join(root, "sandboxes")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("oci: create state dir: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("oci: chmod state dir: %w", err)
		}
	}
	if opts.UserNamespaces != "" && opts.UserNamespaces != UsernsAuto && opts.UserNamespaces != UsernsOff {
		return nil, errdefs.Invalid("oci: user namespaces %q: want auto or off", opts.UserNamespaces)
	}
	r.setupUserns(opts.UserNamespaces)
	if err := r.openDiskPool(opts.DiskPool); err != nil {
		return nil, err
	}
	r.log.Debug("runtime ready", "version", firstLine(out), "platform", r.platform, "cgroup_v2", host.cgroupV2, "swap_accounting", host.swapAccounting)
	return r, nil
}

// Name is the runtime name the API shows.
func (r *Runtime) Name() string {
	if r.kind == KindRunsc {
		return "gvisor"
	}
	return r.kind // runc or crun
}

// Platform is gVisor's platform for runsc ("" for the others).
func (r *Runtime) Platform() string { return r.platform }

func (r *Runtime) stateDir() string { return filepath.Join(r.root, "state") }

func (r *Runtime) sandboxDir(id string) string { return filepath.Join(r.root, "sandboxes", id) }

// globalArgs are the flags an invocation of the binary carries, so that
// each command sees the same state root and sandbox configuration. cmd is
// the command that follows: runsc's network flag is the container's own.
func (r *Runtime) globalArgs(cmd []string) []string {
	args := []string{"--root", r.stateDir()}
	if r.kind == KindRunsc {
		args = append(args,
			"--platform="+r.platform,
			// The agent creates its socket in a bind-mounted host dir; the
			// daemon must be able to connect to it from outside.
			"--host-uds=create",
			// Writes must land in our overlay upper (the size-capped disk),
			// not in a sentry-memory overlay that would bypass the cap and
			// be lost on stop.
			"--overlay2=none",
			// Applies the config's seccomp profile inside the sentry too
			// (checked: /proc/self/status shows a filter in the sandbox).
			"--oci-seccomp",
			// No --ignore-cgroups: on this cgroup v1 host runsc puts the
			// sentry and gofer in cgroupsPath and applies the limits. They
			// bind the sandbox as a whole: gVisor sizes its memory to the
			// limit but has no OOM killer of its own, so going over it
			// has the host kill the sentry (the whole sandbox), and the
			// pids limit counts host tasks (see runscPidsLimit).
		)
		if r.pidsInside {
			// A cgroup v2 tree inside the sentry: one hierarchy, so its
			// pids controller is charged on fork (runsc_pids.go).
			args = append(args, "--in-sandbox-cgroup=v2")
		}
		args = append(args, r.runscNetworkArgs(cmd)...)
	}
	return args
}

// runOpts tune one runtime invocation.
type runOpts struct {
	stdout io.Writer // default: captured and returned
	stderr io.Writer // default: captured into the error
}

// run executes the runtime binary with the global flags and args. It is the
// one place the binary is run: it applies the context's deadline (or a
// default one) and puts the runtime's stderr into the error message.
func (r *Runtime) run(ctx context.Context, o runOpts, args ...string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	bin, full, lerr := r.commandLine(ctx, args)
	if lerr != nil {
		return nil, lerr
	}
	cmd := exec.CommandContext(ctx, bin, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if o.stdout != nil {
		cmd.Stdout = o.stdout
	}
	cmd.Stderr = &stderr
	if o.stderr != nil {
		cmd.Stderr = o.stderr
	}
	// A container's init inherits this process group; keeping it apart
	// from the daemon's means a terminal's ^C never reaches sandboxes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	err := cmd.Run()
	r.log.Debug("exec", "args", strings.Join(args, " "), "took", time.Since(began))
	if err != nil {
		if ctx.Err() != nil {
			return stdout.Bytes(), fmt.Errorf("%s %s: %w", r.kind, args[0], errdefs.ErrDeadlineExceeded)
		}
		return stdout.Bytes(), &cmdError{kind: r.kind, op: args[0], stderr: strings.TrimSpace(stderr.String()), err: err}
	}
	return stdout.Bytes(), nil
}

// cmdError is a failed runtime command with what it printed.
type cmdError struct {
	kind, op, stderr string
	err              error
}

func (e *cmdError) Error() string {
	msg := e.stderr
	if len(msg) > 2048 {
		msg = msg[len(msg)-2048:]
	}
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("%s %s: %s", e.kind, e.op, msg)
}

func (e *cmdError) Unwrap() error { return e.err }

// isNotExist reports whether a runtime command failed because the
// container does not exist (runc and runsc phrase it differently).
func isNotExist(err error) bool {
	var ce *cmdError
	if !errors.As(err, &ce) {
		return false
	}
	s := strings.ToLower(ce.stderr)
	return strings.Contains(s, "does not exist") || strings.Contains(s, "not exist") ||
		strings.Contains(s, "no such file") || strings.Contains(s, "not found")
}

// runtimeVersion is the version in `<bin> --version` output ("runc
// version 1.1.5", "runsc version v0.0.0-...").
func runtimeVersion(out []byte) string {
	f := strings.Fields(firstLine(out))
	for i, w := range f {
		if w == "version" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return firstLine(out)
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// logTail returns the last bytes of a file, for error messages about a
// container whose own output explains its failure.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	return strings.TrimSpace(string(b))
}
