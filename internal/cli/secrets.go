package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api"
)

// maxSecretInput bounds what secret set reads: 64 KiB and a newline.
const maxSecretInput = 64<<10 + 2

func newSecretCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage secrets the egress proxy injects into HTTPS requests (values never enter sandboxes)",
		Args:  cobra.NoArgs,
	}
	var fromFile, fromEnv string
	set := &cobra.Command{
		Use:   "set NAME (--from-file FILE | --from-env VAR)",
		Short: "Create or replace a secret; its value is read from a file ('-' for stdin) or an environment variable, never from the command line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := readSecretValue(cmd.InOrStdin(), fromFile, fromEnv)
			if err != nil {
				return err
			}
			s, err := g.client().SetSecret(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.Name)
			return nil
		},
	}
	set.Flags().StringVar(&fromFile, "from-file", "", "read the value from this file ('-' for stdin); one trailing newline is dropped")
	set.Flags().StringVar(&fromEnv, "from-env", "", "read the value from this environment variable")
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List secrets (names, times and the sandboxes whose rules use them; never values)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), api.SecretList{Secrets: nonNil(list)})
			}
			now := time.Now()
			t := newTable(cmd.OutOrStdout(), "NAME", "CREATED", "UPDATED", "USED BY")
			for _, s := range list {
				t.row(s.Name, ago(s.CreatedAt, now), ago(s.UpdatedAt, now), strings.Join(s.UsedBy, ","))
			}
			return t.flush()
		},
	}
	rm := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a secret (refused while an injection rule uses it)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().DeleteSecret(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), args[0])
			return nil
		},
	}
	cmd.AddCommand(set, ls, rm)
	return cmd
}

// readSecretValue reads a value from exactly one source. One trailing
// newline (from echo or an editor) is dropped; other line breaks are the
// daemon's to refuse.
func readSecretValue(stdin io.Reader, file, env string) ([]byte, error) {
	var v []byte
	switch {
	case file != "" && env != "":
		return nil, errors.New("give one of --from-file and --from-env")
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, maxSecretInput+1))
		if err != nil {
			return nil, err
		}
		v = b
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxSecretInput+1))
		if err != nil {
			return nil, err
		}
		v = b
	case env != "":
		s, ok := os.LookupEnv(env)
		if !ok {
			return nil, fmt.Errorf("environment variable %s is not set", env)
		}
		v = []byte(s)
	default:
		return nil, errors.New("give the value with --from-file FILE ('-' for stdin) or --from-env VAR; values are never taken from the command line")
	}
	if len(v) > maxSecretInput {
		return nil, fmt.Errorf("secret value is larger than 64 KiB")
	}
	v = bytes.TrimSuffix(v, []byte("\n"))
	v = bytes.TrimSuffix(v, []byte("\r"))
	if len(v) == 0 {
		return nil, errors.New("secret value is empty")
	}
	return v, nil
}

func newNetInjectCmd(g *globals) *cobra.Command {
	var host, header string
	cmd := &cobra.Command{
		Use:   "inject SANDBOX --host HOST --header 'Name: template'",
		Short: "Add a credential injection rule: HTTPS requests to HOST get the header, {{secret:NAME}} replaced by the secret",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, value, ok := strings.Cut(header, ":")
			if host == "" || !ok {
				return errors.New("give --host HOST and --header 'Name: value', e.g. --header 'Authorization: Bearer {{secret:gh-token}}'")
			}
			p, err := g.client().SetInjection(cmd.Context(), args[0], api.Injection{Host: host, Header: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
			if err != nil {
				return err
			}
			return printPolicy(cmd, p)
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "host name or glob (same syntax as allow rules; it must still be allowed)")
	cmd.Flags().StringVar(&header, "header", "", "'Name: value template', e.g. 'Authorization: Bearer {{secret:gh-token}}'")
	return cmd
}

func newNetUninjectCmd(g *globals) *cobra.Command {
	var host, header string
	cmd := &cobra.Command{
		Use:   "uninject SANDBOX --host HOST [--header NAME]",
		Short: "Remove credential injection rules of a host (every header, or one)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if host == "" {
				return errors.New("give --host HOST")
			}
			p, err := g.client().RemoveInjection(cmd.Context(), args[0], host, header)
			if err != nil {
				return err
			}
			return printPolicy(cmd, p)
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "host name or glob of the rule")
	cmd.Flags().StringVar(&header, "header", "", "only this header's rule")
	return cmd
}

// printInjections lists rules with their templates (never values).
func printInjections(w io.Writer, p *api.NetworkPolicy) {
	for _, in := range p.Inject {
		fmt.Fprintf(w, "inject: %s %s: %s\n", in.Host, in.Header, in.Value)
	}
}
