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
	var (
		e2bFormat bool
		scope     string
	)
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an API key and print its secret (shown only this once)",
		Long: `Create an API key and print its secret (shown only this once).

A key of scope own (the default) sees and acts only on the sandboxes,
snapshots, backups, secrets and ledgers it creates; everything else is not
found for it. Images, templates, pools and the policy are shared: it may
read and use them, but only scope all or the unix socket may delete images
or templates or set pools. A key of scope all sees everything.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format := api.KeyFormatPaddock
			if e2bFormat {
				format = api.KeyFormatE2B
			}
			switch scope {
			case api.KeyScopeOwn, api.KeyScopeAll:
			default:
				return fmt.Errorf("--scope %q: want %s or %s", scope, api.KeyScopeOwn, api.KeyScopeAll)
			}
			k, err := g.client().CreateKeyWith(cmd.Context(), api.CreateKeyRequest{Name: args[0], Format: format, Scope: scope})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), k)
			}
			// The secret alone on stdout, so $(paddock keys create x) captures it.
			fmt.Fprintf(cmd.ErrOrStderr(), "Created key %s (%s, scope %s). Store its secret now; it is not shown again:\n", k.ID, k.Name, k.Scope)
			fmt.Fprintln(cmd.OutOrStdout(), k.Secret)
			return nil
		},
	}
	create.Flags().BoolVar(&e2bFormat, "e2b", false, "issue the key in E2B's format (e2b_ + hex), for E2B_API_KEY")
	create.Flags().StringVar(&scope, "scope", api.KeyScopeOwn, "what the key sees: own (what it creates) or all (everything)")
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
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "SCOPE", "PREFIX", "CREATED")
			for _, k := range keys {
				t.row(k.ID, k.Name, k.Scope, k.Prefix, ago(k.CreatedAt, now))
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
