package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/paddock-dev/paddock/internal/daemon"
	"github.com/spf13/cobra"
)

// clientVersion is the binary's version: one binary is both client and
// daemon, so it is the one the build stamps into the daemon package.
func clientVersion() string {
	if daemon.Version != "" && daemon.Version != "dev" {
		return daemon.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and, when reachable, the daemon's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type versions struct {
				Client      string `json:"client"`
				Daemon      string `json:"daemon,omitempty"`
				DaemonError string `json:"daemon_error,omitempty"`
			}
			v := versions{Client: clientVersion()}
			// The daemon being down is worth saying, not worth failing for:
			// the client's version is still the answer asked for.
			if h, err := g.client().Health(cmd.Context()); err != nil {
				v.DaemonError = err.Error()
			} else {
				v.Daemon = h.Version
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "client:", v.Client)
			if v.Daemon != "" {
				fmt.Fprintln(cmd.OutOrStdout(), "daemon:", v.Daemon)
			} else {
				fmt.Fprintln(cmd.ErrOrStderr(), "daemon: not reachable:", v.DaemonError)
			}
			return nil
		},
	}
}
