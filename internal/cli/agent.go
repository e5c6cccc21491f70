package cli

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/internal/agent"
)

// defaultAgentSocket is where the agent listens inside a sandbox; its
// directory is a bind mount of a host directory the daemon reaches.
const defaultAgentSocket = "/.paddock/run/agent.sock"

func newAgentCmd() *cobra.Command {
	var (
		socket string
		debug  bool
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the in-sandbox agent (PID 1 of every sandbox)",
		// Only the daemon starts it, inside a sandbox.
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "agent")
			ln, err := agent.ListenUnix(socket)
			if err != nil {
				return err
			}
			a := agent.New(agent.Options{Logger: log})
			log.Info("agent listening", "socket", socket, "pid", os.Getpid(), "envd_version", agent.EnvdVersion)
			// The command's context ends on SIGTERM or SIGINT (see Main):
			// Serve then stops every process group and returns.
			return a.Serve(cmd.Context(), ln)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", agentEnvOr(agent.EnvPrefix+"SOCKET", defaultAgentSocket), "unix socket to listen on")
	cmd.Flags().BoolVar(&debug, "debug", os.Getenv(agent.EnvPrefix+"DEBUG") == "1", "log at debug level")
	return cmd
}

func agentEnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
