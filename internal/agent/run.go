package agent

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/wire"
)

// Run is the agent's whole life as PID 1 of a sandbox: listen on socket and
// serve until ctx ends (SIGTERM), then stop every process group. Both the
// small paddock-agent binary and `paddock agent` call it.
func Run(ctx context.Context, socket string, debug bool) error {
	return RunWith(ctx, RunOptions{Socket: socket, Debug: debug})
}

// RunOptions say where the agent listens.
type RunOptions struct {
	// Socket is the unix socket path (the local runtimes).
	Socket string
	// Listen, when set, is a TCP address (":49983") to listen on instead
	// of Socket: a sandbox that runs elsewhere (a Kubernetes pod) is
	// reached over its network. Token must be set with it.
	Listen string
	// Token is the secret every request over Listen must carry in
	// TokenHeader. The daemon makes one per sandbox.
	Token string
	// PoolToken is set instead of Token for a warm pool's agent, which
	// starts unclaimed (claim.go).
	PoolToken string
	Debug     bool
	// EtcDir holds the passwd and group files users are resolved from
	// (default /etc). A test backend running agents on the host gives
	// each its own, so a sandbox's home is its directory, not the host
	// user's.
	EtcDir string
}

// TokensFromEnv sets o's Token, or for a warm pool's agent its PoolToken,
// from the environment (EnvToken, EnvPoolToken) when o listens on TCP.
func (o *RunOptions) TokensFromEnv() {
	if o.Listen == "" {
		return
	}
	o.Token = os.Getenv(EnvToken)
	if o.Token == "" {
		o.PoolToken = os.Getenv(EnvPoolToken)
	}
}

// RunWith is Run with every option.
func RunWith(ctx context.Context, o RunOptions) error {
	socket, debug := o.Socket, o.Debug
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "agent")
	// The signal that ends the agent is recorded beside its socket, where
	// the daemon reads why the sandbox stopped (internal/runtime/oci). It
	// is watched for before the socket exists: the daemon takes a
	// listening socket for a running sandbox, and a signal sent at once
	// must be recorded too.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigc)
	var ln net.Listener
	var err error
	if o.Listen != "" {
		ln, err = ListenTCP(o.Listen, cmp.Or(o.Token, o.PoolToken))
	} else {
		ln, err = ListenUnix(socket)
	}
	if err != nil {
		return err
	}
	a := New(Options{Logger: log, DefaultUser: os.Getenv(EnvDefaultUser), DefaultCwd: os.Getenv(EnvDefaultCwd), Token: o.Token, PoolToken: o.PoolToken, EtcDir: o.EtcDir})
	a.ownHomeFromEnv()  // homevolume.go
	a.startFromEnv(ctx) // startcmd.go
	if o.Listen != "" {
		a.egressRelayFromEnv(ctx) // egressrelay.go
	}
	log.Info("agent listening", "address", ln.Addr().String(), "pid", os.Getpid(), "envd_version", EnvdVersion)
	var d Detach
	if o.Listen == "" {
		var stop func()
		d, stop = UnixDetach(socket)
		defer stop()
	}
	err = a.ServeDetachable(ctx, ln, d)
	record := "status 0"
	var sig os.Signal
	select {
	case sig = <-sigc:
	default:
		if ctx.Err() != nil {
			// The caller's context may end on the same signal (the
			// agent binary's main does), and the signal can reach that
			// context a moment before sigc.
			select {
			case sig = <-sigc:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if s, ok := sig.(syscall.Signal); ok {
		record = "signal " + strconv.Itoa(int(s))
	} else if err != nil {
		record = "status 1"
	}
	if o.Listen == "" {
		writeExitRecord(filepath.Dir(socket), record, log)
	}
	return err
}

// exitRecordName is the file beside the agent's socket that says how the
// agent ended: "signal N" or "status N". The daemon reads it with the same
// name (internal/runtime/oci, agentExitName).
const exitRecordName = "agent.exit"

func writeExitRecord(dir, record string, log *slog.Logger) {
	p := filepath.Join(dir, exitRecordName)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("clear exit record", "err", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		log.Warn("write exit record", "err", err)
		return
	}
	_, _ = f.WriteString(record + "\n")
	_ = f.Close()
}

// The daemon passes an image's User and WorkingDir in these variables.
const (
	EnvDefaultUser = wire.EnvDefaultUser
	EnvDefaultCwd  = wire.EnvDefaultCwd
)

// DefaultSocket is where the agent listens inside a sandbox; its directory
// is a bind mount of a host directory the daemon reaches.
const DefaultSocket = "/.paddock/run/agent.sock"

// SocketFromEnv is the socket the environment names, or DefaultSocket.
func SocketFromEnv() string {
	if v := os.Getenv(EnvPrefix + "SOCKET"); v != "" {
		return v
	}
	return DefaultSocket
}

// EnvToken names the variable that carries the agent's token when it
// listens on TCP. Like every PADDOCK_AGENT_ variable, it is not passed on
// to the sandbox's processes.
const EnvToken = wire.EnvToken

// DefaultPort is the agent's TCP port when it listens on one: envd's.
const DefaultPort = wire.DefaultPort

// DebugFromEnv says whether the environment asks for debug logs.
func DebugFromEnv() bool { return os.Getenv(EnvPrefix+"DEBUG") == "1" }
