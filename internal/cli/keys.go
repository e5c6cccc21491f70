package cli

import (
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/spf13/cobra"
)

func newKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage API keys for TCP access",
		Args:  cobra.NoArgs,
	}
	var e2bFormat bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an API key and print its secret (shown only this once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format := api.KeyFormatPaddock
			if e2bFormat {
				format = api.KeyFormatE2B
			}
			k, err := g.client().CreateKeyFormat(cmd.Context(), args[0], format)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), k)
			}
			// The secret alone on stdout, so $(paddock keys create x) captures it.
			fmt.Fprintf(cmd.ErrOrStderr(), "Created key %s (%s). Store its secret now; it is not shown again:\n", k.ID, k.Name)
			fmt.Fprintln(cmd.OutOrStdout(), k.Secret)
			return nil
		},
	}
	create.Flags().BoolVar(&e2bFormat, "e2b", false, "issue the key in E2B's format (e2b_ + hex), for E2B_API_KEY")
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List API keys",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := g.client().ListKeys(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.KeyList{Keys: nonNil(keys)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "PREFIX", "CREATED")
			for _, k := range keys {
				t.row(k.ID, k.Name, k.Prefix, ago(k.CreatedAt, now))
			}
			return t.flush()
		},
	}
	rm := &cobra.Command{
		Use:     "rm ID",
		Aliases: []string{"delete"},
		Short:   "Revoke an API key",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().DeleteKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), args[0])
			return nil
		},
	}
	cmd.AddCommand(create, ls, rm)
	return cmd
}
