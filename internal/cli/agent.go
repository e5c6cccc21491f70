package cli

import "github.com/spf13/cobra"

func newAgentCmd() *cobra.Command {
	return &cobra.Command{Use: "agent", Short: "Run the in-sandbox agent (PID 1 of every sandbox)", Hidden: true}
}
