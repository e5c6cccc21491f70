package cli

import (
	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/internal/agent"
)

// newAgentCmd is the agent inside the paddock binary. Release builds give
// sandboxes the smaller cmd/paddock-agent instead (see internal/agentbin);
// this one serves builds made without it, such as a plain `go build`.
func newAgentCmd() *cobra.Command {
	var (
		socket string
		listen string
		debug  bool
		seed   string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the in-sandbox agent (PID 1 of every sandbox)",
		// Only the daemon starts it, inside a sandbox.
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The command's context ends on SIGTERM or SIGINT (see Main):
			// Run then stops every process group and returns.
			if seed != "" {
				return agent.SeedHomeCommand(seed, cmd.ErrOrStderr())
			}
			opts := agent.RunOptions{Socket: socket, Listen: listen, Debug: debug}
			opts.TokensFromEnv()
			return agent.RunWith(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", agent.SocketFromEnv(), "unix socket to listen on")
	cmd.Flags().StringVar(&listen, "listen", "", "TCP address to listen on instead of the socket (needs "+agent.EnvToken+", or "+agent.EnvPoolToken+" for a warm pool)")
	cmd.Flags().BoolVar(&debug, "debug", agent.DebugFromEnv(), "log at debug level")
	cmd.Flags().StringVar(&seed, "seed-home", "", "copy the directory FROM into the fresh home volume TO (FROM:TO) and exit, instead of serving")
	return cmd
}
