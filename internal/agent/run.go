package agent

import (
	"context"
	"log/slog"
	"os"
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
	a := New(Options{Logger: log, DefaultUser: os.Getenv(EnvDefaultUser), DefaultCwd: os.Getenv(EnvDefaultCwd)})
	log.Info("agent listening", "socket", socket, "pid", os.Getpid(), "envd_version", EnvdVersion)
	return a.Serve(ctx, ln)
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
