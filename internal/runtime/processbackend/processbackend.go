// Package processbackend is a runtime.Backend for tests: it runs the real
// Paddock agent (internal/agent) as a plain child process listening on a
// unix socket in a per-sandbox directory, with no container, no namespace,
// no cgroup and no image mounted. It ISOLATES NOTHING: the agent and every
// command it runs see the host's filesystem, users, network and processes,
// with the rights of the process that started them. It exists so the
// controller and the HTTP server can be tested end to end against a real
// agent without root, runc or runsc; never wire it into a daemon.
//
// A sandbox is the directory <Dir>/<id>: run/agent.sock is the agent's
// socket, home/ its default working directory and its user's home (etc/
// holds a passwd naming it, when the agent runs through RunAgentIfChild),
// so files a sandbox writes there survive Stop and Start and go with
// Destroy. A command whose request
// names no user runs as the user who runs the test, whatever the image
// says; one that names a user is switched to it only when the test runs as
// root (then it may lack the rights to the sandbox's directory). Resources
// are validated but not enforced.
//
// The agent runs from Options.Agent, or from the spec's AgentBinary: a
// paddock-agent build, or a test binary whose TestMain calls
// RunAgentIfChild first, which saves building one.
package processbackend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// Options configure a Backend.
type Options struct {
	// Dir holds one directory per sandbox; it must exist. Keep it short:
	// a unix socket path has at most 107 bytes.
	Dir string
	// Agent is the executable that runs the agent; empty means each
	// spec's AgentBinary. It gets the arguments `agent --socket PATH`.
	Agent string
	// Name is what Name returns; default "runc", so a controller's
	// default runtime finds it.
	Name string
	// StopGrace is how long Stop waits after SIGTERM (the agent ends its
	// processes first) before SIGKILL; default 10s.
	StopGrace time.Duration
	Logger    *slog.Logger
}

// Backend runs each sandbox's agent as a child process. Create it with New.
type Backend struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	procs map[string]*proc // running agents by sandbox id
}

// proc is one run of a sandbox's agent.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the agent has been waited for
	exit runtime.Exit  // set before done is closed
}

var (
	_ runtime.Backend = (*Backend)(nil)
	_ runtime.Watcher = (*Backend)(nil)
)

// New returns a Backend keeping its sandboxes under opts.Dir.
func New(opts Options) (*Backend, error) {
	if os.Getenv(childEnv) == "1" {
		// This process was started to be an agent, and its TestMain did
		// not hand it to RunAgentIfChild: it runs the tests instead, which
		// would start agents of their own, each running the tests again.
		return nil, errors.New("processbackend: this test binary was started as an agent but its TestMain does not call processbackend.RunAgentIfChild first")
	}
	if opts.Dir == "" {
		return nil, errors.New("processbackend: Dir is required")
	}
	if fi, err := os.Stat(opts.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("processbackend: %s is not a directory", opts.Dir)
	}
	if opts.Name == "" {
		opts.Name = "runc"
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{opts: opts, log: opts.Logger.With("component", "processbackend"), procs: make(map[string]*proc)}, nil
}

// Name implements runtime.Backend.
func (b *Backend) Name() string { return b.opts.Name }

// Bounds on a spec, as loose as a real backend's: they only keep garbage out.
const (
	maxIDLen       = 32
	minMemoryBytes = 8 << 20
	maxMemoryBytes = 1 << 40
	maxDiskBytes   = 16 << 40
	maxCPUMillis   = 1024 * 1000
	maxPids        = 1 << 22
	maxEnv         = 4096
)

func checkID(id string) error {
	ok := len(id) > 0 && len(id) <= maxIDLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
	}
	if !ok {
		return errdefs.Invalid("invalid sandbox id %q: want 1 to 32 of [a-z0-9]", truncate(id, 40))
	}
	return nil
}

func checkSpec(spec runtime.Spec) error {
	if err := checkID(spec.ID); err != nil {
		return err
	}
	r := spec.Resources
	switch {
	case r.CPUMillis < 0 || r.CPUMillis > maxCPUMillis:
		return errdefs.Invalid("cpu %d millis out of range", r.CPUMillis)
	case r.MemoryBytes < minMemoryBytes || r.MemoryBytes > maxMemoryBytes:
		return errdefs.Invalid("memory %d bytes out of range", r.MemoryBytes)
	case r.DiskBytes < 0 || r.DiskBytes > maxDiskBytes:
		return errdefs.Invalid("disk %d bytes out of range", r.DiskBytes)
	case r.Pids < 0 || r.Pids > maxPids:
		return errdefs.Invalid("pids %d out of range", r.Pids)
	case len(spec.AllEnv()) > maxEnv:
		return errdefs.Invalid("%d environment variables, at most %d", len(spec.AllEnv()), maxEnv)
	}
	for _, kv := range spec.AllEnv() {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return errdefs.Invalid("environment entry %q is not KEY=VALUE", truncate(kv, 40))
		}
	}
	return nil
}

func (b *Backend) dir(id string) string { return filepath.Join(b.opts.Dir, id) }

// Home is sandbox id's home: its user's home and default working
// directory, where a relative path of its files lands.
func (b *Backend) Home(id string) string   { return filepath.Join(b.dir(id), "home") }
func (b *Backend) socket(id string) string { return filepath.Join(b.dir(id), "run", "agent.sock") }

// running returns the live agent of id, if any.
func (b *Backend) running(id string) *proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.procs[id]
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
		return p
	}
}

// Start implements runtime.Backend: it creates the sandbox's directory if
// needed (keeping its files otherwise) and starts the agent.
func (b *Backend) Start(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	if err := checkSpec(spec); err != nil {
		return runtime.Info{}, err
	}
	bin := cmp.Or(b.opts.Agent, spec.AgentBinary)
	if bin == "" {
		return runtime.Info{}, errdefs.Invalid("no agent binary")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.procs[spec.ID]; p != nil {
		select {
		case <-p.done:
		default:
			return runtime.Info{}, fmt.Errorf("sandbox %s is running: %w", spec.ID, errdefs.ErrConflict)
		}
	}
	dir := b.dir(spec.ID)
	home := b.Home(spec.ID)
	for _, d := range []string{filepath.Dir(b.socket(spec.ID)), home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return runtime.Info{}, fmt.Errorf("sandbox directory: %w", err)
		}
	}
	etc, err := writeEtc(dir, home)
	if err != nil {
		return runtime.Info{}, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return runtime.Info{}, fmt.Errorf("agent log: %w", err)
	}
	defer logf.Close()
	sock := b.socket(spec.ID)
	// exec.Cmd keeps the last of duplicate keys: what the backend sets
	// wins over the spec, which wins over the host's PATH.
	env := append([]string{"PATH=" + os.Getenv("PATH"), wire.EnvDefaultCwd + "=" + home}, spec.AllEnv()...)
	env = append(env,
		wire.EnvPrefix+"SOCKET="+sock,
		wire.EnvDefaultUser+"="+strconv.Itoa(os.Getuid()),
		childEnv+"=1",
		etcEnv+"="+etc,
	)
	cmd := exec.Command(bin, "agent", "--socket", sock)
	cmd.Env = env
	cmd.Dir = home
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and gone with the test process that owns it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return runtime.Info{}, fmt.Errorf("start agent: %v: %w", err, errdefs.ErrUnavailable)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	b.procs[spec.ID] = p
	go func() {
		err := cmd.Wait()
		p.exit = exitOf(cmd.ProcessState, err)
		close(p.done)
	}()
	b.log.Debug("agent started", "sandbox", spec.ID, "pid", cmd.Process.Pid)
	return runtime.Info{AgentSocket: sock, Pid: cmd.Process.Pid}, nil
}

func exitOf(st *os.ProcessState, err error) runtime.Exit {
	if st == nil {
		return runtime.Exit{Reason: fmt.Sprintf("agent lost: %v", err)}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return runtime.Exit{Reason: "agent exited: signal " + strconv.Itoa(int(ws.Signal())), Known: true}
	}
	return runtime.Exit{Reason: "agent exited: status " + strconv.Itoa(st.ExitCode()), Known: true}
}

// Status implements runtime.Backend.
func (b *Backend) Status(_ context.Context, id string) (runtime.Status, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if b.running(id) != nil {
		return runtime.StatusRunning, nil
	}
	if _, err := os.Stat(b.dir(id)); err != nil {
		return "", fmt.Errorf("sandbox %s: %w: %w", id, runtime.ErrNotFound, errdefs.ErrNotFound)
	}
	return runtime.StatusStopped, nil
}

// Info implements runtime.Backend.
func (b *Backend) Info(_ context.Context, id string) (runtime.Info, error) {
	if err := checkID(id); err != nil {
		return runtime.Info{}, err
	}
	p := b.running(id)
	if p == nil {
		return runtime.Info{}, fmt.Errorf("sandbox %s runs no agent: %w: %w", id, runtime.ErrNotFound, errdefs.ErrNotFound)
	}
	return runtime.Info{AgentSocket: b.socket(id), Pid: p.cmd.Process.Pid}, nil
}

// Signal implements runtime.Backend: sig goes to the agent.
func (b *Backend) Signal(_ context.Context, id string, sig syscall.Signal) error {
	if err := checkID(id); err != nil {
		return err
	}
	p := b.running(id)
	if p == nil {
		return fmt.Errorf("sandbox %s runs no agent: %w: %w", id, runtime.ErrNotFound, errdefs.ErrNotFound)
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal agent: %w", err)
	}
	return nil
}

// Stop implements runtime.Backend: SIGTERM (the agent ends its processes),
// then SIGKILL after StopGrace. The sandbox's directory stays.
func (b *Backend) Stop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	b.mu.Lock()
	p := b.procs[id]
	delete(b.procs, id)
	b.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	grace := time.NewTimer(b.opts.StopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("agent of %s did not end after SIGKILL: %w", id, errdefs.ErrUnavailable)
	}
}

// Destroy implements runtime.Backend.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	if err := b.Stop(ctx, id); err != nil {
		return err
	}
	if err := os.RemoveAll(b.dir(id)); err != nil {
		return fmt.Errorf("remove sandbox directory: %w", err)
	}
	return nil
}

// List implements runtime.Backend: every sandbox directory.
func (b *Backend) List(context.Context) ([]string, error) {
	des, err := os.ReadDir(b.opts.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var ids []string
	for _, de := range des {
		if de.IsDir() && checkID(de.Name()) == nil {
			ids = append(ids, de.Name())
		}
	}
	b.mu.Lock()
	for id := range b.procs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	b.mu.Unlock()
	return ids, nil
}

// Wait implements runtime.Watcher.
func (b *Backend) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	if err := checkID(id); err != nil {
		return runtime.Exit{}, err
	}
	b.mu.Lock()
	p := b.procs[id]
	b.mu.Unlock()
	if p == nil {
		return runtime.Exit{Reason: "no agent runs"}, nil
	}
	select {
	case <-p.done:
		return p.exit, nil
	case <-ctx.Done():
		return runtime.Exit{}, ctx.Err()
	}
}

// childEnv marks a process the backend started as an agent: a test-only
// hook between this test backend and its own children, not a daemon
// setting, so not part of config.Config.
const childEnv = "PADDOCK_PROCESSBACKEND_AGENT"

// etcEnv names the sandbox's own passwd and group directory for the child
// agent (RunAgentIfChild): the user who runs the test, with the sandbox's
// home/ as its home, so a relative path of the files API lands in the
// sandbox's directory and never in the host user's home.
const etcEnv = "PADDOCK_PROCESSBACKEND_ETC"

// writeEtc writes dir/etc/passwd and group naming the user and group who
// run the test (also as root, when that is who runs it), home as the
// user's home, and returns the directory.
func writeEtc(dir, home string) (string, error) {
	uid, gid := os.Getuid(), os.Getgid()
	name, group := "u"+strconv.Itoa(uid), "g"+strconv.Itoa(gid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	}
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		group = g.Name
	}
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return "", fmt.Errorf("sandbox etc: %w", err)
	}
	passwd := fmt.Sprintf("%s:x:%d:%d:%s:%s:/bin/sh\n", name, uid, gid, name, home)
	groups := fmt.Sprintf("%s:x:%d:\n", group, gid)
	if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte(passwd), 0o644); err != nil {
		return "", fmt.Errorf("sandbox passwd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(etc, "group"), []byte(groups), 0o644); err != nil {
		return "", fmt.Errorf("sandbox group: %w", err)
	}
	return etc, nil
}

// RunAgentIfChild makes a test binary usable as the agent executable:
// called first in TestMain, it runs the agent and exits when the backend
// started this process as one, and returns at once otherwise.
func RunAgentIfChild() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	// Commands the agent runs must not take themselves for agents.
	_ = os.Unsetenv(childEnv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	etc := os.Getenv(etcEnv)
	_ = os.Unsetenv(etcEnv)
	if err := agent.RunWith(ctx, agent.RunOptions{Socket: agent.SocketFromEnv(), Debug: agent.DebugFromEnv(), EtcDir: etc}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
