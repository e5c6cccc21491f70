package agent

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
)

// Run is the agent's whole life as PID 1 of a sandbox: listen on socket and
// serve until ctx ends (SIGTERM), then stop every process group. Both the
// small paddock-agent binary and `paddock agent` call it.
func Run(ctx context.Context, socket string, debug bool) error {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "agent")
	ln, err := ListenUnix(socket)
	if err != nil {
		return err
	}
	// The signal that ends the agent is recorded beside its socket, where
	// the daemon reads why the sandbox stopped (internal/runtime/oci).
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigc)
	a := New(Options{Logger: log, DefaultUser: os.Getenv(EnvDefaultUser), DefaultCwd: os.Getenv(EnvDefaultCwd)})
	log.Info("agent listening", "socket", socket, "pid", os.Getpid(), "envd_version", EnvdVersion)
	err = a.Serve(ctx, ln)
	record := "status 0"
	select {
	case sig := <-sigc:
		if s, ok := sig.(syscall.Signal); ok {
			record = "signal " + strconv.Itoa(int(s))
		}
	default:
		if err != nil {
			record = "status 1"
		}
	}
	writeExitRecord(filepath.Dir(socket), record, log)
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
	EnvDefaultUser = EnvPrefix + "USER"
	EnvDefaultCwd  = EnvPrefix + "WORKDIR"
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

// DebugFromEnv says whether the environment asks for debug logs.
func DebugFromEnv() bool { return os.Getenv(EnvPrefix+"DEBUG") == "1" }
