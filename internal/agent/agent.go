// Package agent is the in-sandbox agent: PID 1 of every sandbox. It reaps
// zombies, starts and tracks processes (pipes or a terminal), serves files,
// watches directories and moves tar streams in and out, speaking E2B envd's
// protocol (Connect RPC services process.Process and filesystem.Filesystem,
// HTTP /files and /health) over h2c on a unix socket the daemon reaches
// through a bind mount.
package agent

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/codectx"
	"github.com/paddock-dev/paddock/internal/agent/files"
	"github.com/paddock-dev/paddock/internal/agent/osproc"
	"github.com/paddock-dev/paddock/internal/agent/portfwd"
	"github.com/paddock-dev/paddock/internal/agent/sessions"
	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1/agentv1connect"
	"github.com/paddock-dev/paddock/proto/gen/process/processconnect"
)

// EnvdVersion is the envd protocol version this agent implements: the
// process and filesystem services with CloseStdin, /files with multipart
// and octet-stream uploads and gzip both ways, /init and /envs; file
// metadata as user.e2b.* xattrs (0.6.2), entry info in watch events (0.6.3)
// and the allow_network_mounts watch option (0.6.4; a sandbox has no
// network mounts). docs/e2b.md lists what is left out.
const EnvdVersion = wire.EnvdVersion

// EnvPrefix marks the agent's own settings in its environment; such
// variables are not passed on to the processes it starts.
const EnvPrefix = wire.EnvPrefix

// Defaults for zero Options fields.
const (
	DefaultKeepalive     = 30 * time.Second
	DefaultShutdownGrace = 5 * time.Second
	DefaultMaxTarBytes   = 16 << 30
	DefaultMaxTarEntries = 1 << 20
	// maxRPCMessage bounds one Connect message (e.g. a SendInput chunk).
	maxRPCMessage = 16 << 20
)

// Options configure an Agent. The zero value is valid.
type Options struct {
	Logger *slog.Logger
	// EtcDir holds the passwd and group files users are resolved from
	// ("/etc" inside a sandbox; tests point it elsewhere).
	EtcDir string
	// Env is the sandbox-wide environment every process inherits. Nil
	// means the agent's own environment without EnvPrefix variables.
	Env []string
	// DefaultUser is who requests naming no user run as (default "user");
	// DefaultCwd where they start (default the user's home). A sandbox's
	// image config sets them (its User and WorkingDir).
	DefaultUser string
	DefaultCwd  string
	// Version is Paddock's version, reported by the Info RPC.
	Version           string
	KeepaliveInterval time.Duration
	// ShutdownGrace is how long processes get between SIGTERM and SIGKILL.
	ShutdownGrace time.Duration
	// MaxTarBytes and MaxTarEntries bound one tar upload.
	MaxTarBytes   int64
	MaxTarEntries int
	// Token, when set, must be in every request's TokenHeader (the agent
	// listens on a network, not on a socket only the daemon reaches).
	Token string
	// PoolToken, set instead of Token, starts the agent unclaimed: it
	// answers only a claim proving PoolToken, which sets its token
	// (claim.go).
	PoolToken string
}

// Agent serves one sandbox. Create it with New.
type Agent struct {
	log     *slog.Logger
	users   users.DB
	opts    Options
	started time.Time
	// gate checks the token of requests over a network (claim.go); nil
	// on the local socket.
	gate *tokenGate

	mu          sync.RWMutex
	env         []string
	defaultUser string
	defaultCwd  string

	// startGate is held for reading while the agent forks a child and
	// for writing by a kill-all, so nothing the agent starts slips past
	// one.
	startGate sync.RWMutex

	files    *files.Service
	procs    *procTable
	sessions *sessions.Service
	bg       *bgTable
	contexts *codectx.Service

	// startState is how the start command given at boot is doing
	// (startcmd.go).
	startState atomic.Int32
	// diskPath is the filesystem usage reports as the sandbox's disk:
	// its home volume when it has one (homevolume.go), else "/".
	diskPath atomic.Pointer[string]
	// relay forwards to the daemon's egress proxy on a cluster
	// (egressrelay.go); nil when the agent was given none.
	relay atomic.Pointer[egressRelay]
}

// New builds an Agent; it starts serving with Serve.
func New(opts Options) *Agent {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.EtcDir == "" {
		opts.EtcDir = "/etc"
	}
	if opts.KeepaliveInterval <= 0 {
		opts.KeepaliveInterval = DefaultKeepalive
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if opts.MaxTarBytes <= 0 {
		opts.MaxTarBytes = DefaultMaxTarBytes
	}
	if opts.MaxTarEntries <= 0 {
		opts.MaxTarEntries = DefaultMaxTarEntries
	}
	env := opts.Env
	if env == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, EnvPrefix) {
				env = append(env, kv)
			}
		}
	}
	var gate *tokenGate
	if opts.Token != "" || opts.PoolToken != "" {
		gate = newTokenGate(opts.Token, opts.PoolToken)
	}
	a := &Agent{
		log:         opts.Logger,
		users:       users.NewDB(opts.EtcDir),
		opts:        opts,
		started:     time.Now(),
		env:         env,
		defaultUser: cmp.Or(opts.DefaultUser, users.DefaultUser),
		defaultCwd:  opts.DefaultCwd,
		procs:       newProcTable(),
		bg:          newBgTable(),
		gate:        gate,
	}
	a.files = files.New(files.Options{
		Logger:        opts.Logger,
		Users:         a.users,
		User:          a.userFor,
		MaxTarBytes:   opts.MaxTarBytes,
		MaxTarEntries: opts.MaxTarEntries,
	})
	a.sessions = sessions.New(sessions.Options{
		Logger:            opts.Logger,
		KeepaliveInterval: opts.KeepaliveInterval,
		User:              func(ctx context.Context, name string) (*users.User, error) { return a.userFor(asUser(ctx, name), "") },
		Env:               func(u *users.User) []string { return buildEnv(a.sandboxEnv(), u, nil) },
		Start:             a.startShell, // sessionshell.go
	})
	a.contexts = codectx.New(codectx.Options{
		Logger:            opts.Logger,
		KeepaliveInterval: opts.KeepaliveInterval,
		User:              a.userFor,
		WorkDir:           a.workDir,
		Env:               func(u *users.User, extra map[string]string) []string { return buildEnv(a.sandboxEnv(), u, extra) },
		Start: func(cmd string, fork func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
			pid, exited, err := a.startChild(fork)
			if err != nil {
				return 0, nil, startError(cmd, err)
			}
			return pid, exited, nil
		},
	})
	return a
}

// Handler returns the agent's whole HTTP surface.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	// Answers go uncompressed even to clients that accept gzip (the
	// daemon's and E2B's do): on a unix socket or a pod network the
	// compression costs more than it saves, and each compressed message
	// took a gzip writer whose reset zeroes about a megabyte (measured:
	// an exec of /bin/true cost the agent 2.6 ms of CPU with it, the
	// first one 12.6 ms). Compressed requests are still read.
	rpcOpts := []connect.HandlerOption{connect.WithReadMaxBytes(maxRPCMessage), connect.WithCompressMinBytes(math.MaxInt32)}
	mux.Handle(processconnect.NewProcessHandler(&processService{a: a}, rpcOpts...))
	a.files.Register(mux, rpcOpts...)
	mux.Handle(agentv1connect.NewAgentServiceHandler(&infoService{a: a}, rpcOpts...))
	a.sessions.Register(mux, rpcOpts...)
	mux.Handle(agentv1connect.NewProcessServiceHandler(&bgService{a: a}, rpcOpts...))
	a.contexts.Register(mux, rpcOpts...)
	mux.HandleFunc("GET /health", a.handleHealth)
	mux.HandleFunc("GET "+TerminalsPath, a.handleTerminals)
	mux.HandleFunc("GET "+ProcsPath, a.handleProcs)
	mux.HandleFunc("POST "+KillAllPath, a.handleKillAll)
	mux.HandleFunc("GET "+wire.UsagePath, a.handleUsage)
	mux.HandleFunc("GET "+wire.StartedPath, a.handleStarted)
	mux.HandleFunc("POST /init", a.handleInit)
	mux.HandleFunc("GET /envs", a.handleEnvs)
	mux.HandleFunc("GET "+wire.PortForwardPath, portfwd.Serve)
	mux.HandleFunc("PUT "+wire.EgressUpstreamPath, a.handleEgressUpstream) // egressrelay.go
	h := withUser(mux)
	if a.gate != nil {
		h = a.gate.wrap(h) // claim.go
	}
	return h
}

// TokenHeader carries the agent's per-sandbox token on a TCP listener.
// Authorization is taken: it selects envd's user.
const TokenHeader = wire.TokenHeader

// maxTokenLen bounds the token; the daemon makes 64 hex digits.
const maxTokenLen = 256

// ListenTCP listens on addr for a sandbox reached over the network. A
// token is required: without one anything on that network could drive
// the sandbox.
func ListenTCP(addr, token string) (net.Listener, error) {
	if len(token) < 32 || len(token) > maxTokenLen {
		return nil, fmt.Errorf("listening on %s needs a token of 32 to %d characters in %s: %w", addr, maxTokenLen, EnvToken, errdefs.ErrInvalidArgument)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %v: %w", addr, err, errdefs.ErrUnavailable)
	}
	return ln, nil
}

// ListenUnix creates the agent's socket at path, replacing a stale one
// left by an earlier agent (the directory is the agent's own).
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", errdefs.ErrFailedPrecondition)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %v: %w", path, err, errdefs.ErrUnavailable)
	}
	// The daemon may run under another uid than the sandbox's root.
	_ = os.Chmod(path, 0o666)
	return ln, nil
}

// Serve answers requests on ln until ctx ends, then shuts down: processes
// get SIGTERM, then SIGKILL after the grace period. It returns nil after a
// clean shutdown.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	return a.ServeDetachable(ctx, ln, Detach{})
}

// Detach lets the daemon take the agent off its socket and put it back
// (detach.go): a gVisor checkpoint cannot save a socket bound on the
// host, which the agent's listener on a local runtime is.
type Detach struct {
	// Off and On receive the requests (signals from the daemon, through
	// the runtime). Nil channels: the agent is never detached.
	Off, On <-chan os.Signal
	// Listen makes the listener again after a detach.
	Listen func() (net.Listener, error)
	// Detached runs once the listener and every connection are closed
	// (the socket file is removed there, which tells the daemon).
	Detached func()
}

// ServeDetachable is Serve that also detaches from its listener on a
// request on d.Off (closing it and every connection on it, hijacked ones
// too, while the sandbox's processes run on) and serves again on
// d.Listen() at the next request on d.On.
func (a *Agent) ServeDetachable(ctx context.Context, ln net.Listener, d Detach) error {
	// The agent reaps from the moment it serves (it is PID 1 of its
	// sandbox), not from New: a test that makes an Agent for its helpers
	// must not have its own children reaped from under exec.Cmd.Wait.
	osproc.StartReaper(a.log)
	for {
		conns := newConnSet()
		srv := a.newServer(ctx, conns)
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return fmt.Errorf("serve: %v: %w", err, errdefs.ErrUnavailable)
		case <-ctx.Done():
			a.shutdownServing(ctx, srv)
			return nil
		case <-d.Off:
		}
		_ = srv.Close()
		<-errc
		conns.closeAll()
		// An attach asked for while attached is moot. It is dropped
		// before the socket goes, which is what the daemon waits for
		// before it may ask for the next.
		drain(d.On)
		if d.Detached != nil {
			d.Detached()
		}
		a.log.Info("detached from the socket: every connection closed, processes keep running")
		select {
		case <-ctx.Done():
			a.shutdownServing(ctx, nil)
			return nil
		case <-d.On:
		}
		drain(d.Off) // so is a detach asked for while detached
		var err error
		if ln, err = d.Listen(); err != nil {
			return fmt.Errorf("listen again after a detach: %w", err)
		}
		a.log.Info("attached to the socket again", "address", ln.Addr().String())
	}
}

// drain takes a pending request off ch, if there is one.
func drain(ch <-chan os.Signal) {
	select {
	case <-ch:
	default:
	}
}

func (a *Agent) newServer(ctx context.Context, conns *connSet) *http.Server {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           a.Handler(),
		Protocols:         &protos,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnState:         conns.track,
	}
}

// shutdownServing ends the agent: every process, every watcher, then the
// server (nil when detached).
func (a *Agent) shutdownServing(ctx context.Context, srv *http.Server) {
	a.log.Info("shutting down", "processes", a.procs.count())
	a.Shutdown(context.WithoutCancel(ctx))
	a.files.Close()
	if srv == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
}

// Shutdown stops every process: SIGTERM to each group, SIGKILL to what is
// left after the grace period.
func (a *Agent) Shutdown(ctx context.Context) {
	// Sessions first, so no shell is restarted while everything ends.
	a.sessions.Close()
	a.contexts.Close()
	a.procs.signalAll(syscall.SIGTERM)
	grace, cancel := context.WithTimeout(ctx, a.opts.ShutdownGrace)
	defer cancel()
	if a.procs.waitEmpty(grace) {
		return
	}
	a.procs.signalAll(syscall.SIGKILL)
	kill, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	a.procs.waitEmpty(kill)
}

func (a *Agent) sandboxEnv() []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return append([]string(nil), a.env...)
}

type userKey struct{}

type userSelection struct {
	name string
	err  error
}

// withUser reads envd's user selection, "Authorization: Basic
// base64(name:)", into the request context. The socket is reachable only
// by the daemon, so the header selects a user but proves nothing.
func withUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get("Authorization"); h != "" {
			// A bad header fails the request when a user is resolved, so
			// each protocol reports it in its own error format.
			name, err := parseBasicUser(h)
			sel := userSelection{name: name, err: err}
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, sel))
		}
		next.ServeHTTP(w, r)
	})
}

func parseBasicUser(h string) (string, error) {
	scheme, payload, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") || len(payload) > 1024 {
		return "", errdefs.Invalid("authorization header must be Basic")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		return "", errdefs.Invalid("authorization header is not valid base64")
	}
	name, _, _ := strings.Cut(string(raw), ":")
	if name != "" && !users.ValidName(name) {
		return "", errdefs.Invalid("invalid user name in authorization header")
	}
	return name, nil
}

// userFor resolves the request's user: an explicit name (envd's username
// query parameter) wins, then the Basic header, then the default user.
func (a *Agent) userFor(ctx context.Context, explicit string) (*users.User, error) {
	name := explicit
	if name == "" {
		sel, _ := ctx.Value(userKey{}).(userSelection)
		if sel.err != nil {
			return nil, sel.err
		}
		name = sel.name
	}
	if name == "" {
		a.mu.RLock()
		name = a.defaultUser
		a.mu.RUnlock()
	}
	return a.users.Lookup(name)
}
