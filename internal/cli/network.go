package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddock-dev/paddock/api"
)

// netFlags are the network flags of create and do.
type netFlags struct {
	mode  string
	allow []string
	deny  []string
}

func (f *netFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.mode, "network", "", `network: "none" (default, loopback only) or "egress" (out through Paddock's proxy, to allowed hosts only)`)
	fs.StringArrayVar(&f.allow, "allow-host", nil, "with egress: allow this host or glob, e.g. pypi.org or '*.pythonhosted.org' (repeatable; implies --network egress)")
	fs.StringArrayVar(&f.deny, "deny-host", nil, "with egress: deny this host or glob; deny rules win (repeatable)")
}

func (f *netFlags) request(req *api.CreateSandboxRequest) error {
	mode := f.mode
	if mode == "" && (len(f.allow) > 0 || len(f.deny) > 0) {
		mode = api.NetworkEgress
	}
	switch mode {
	case "", api.NetworkNone:
		if len(f.allow) > 0 || len(f.deny) > 0 {
			return fmt.Errorf("--allow-host and --deny-host need --network egress")
		}
		return nil
	case api.NetworkEgress:
		req.Network = &api.NetworkPolicy{Mode: mode, AllowHosts: f.allow, DenyHosts: f.deny}
		return nil
	default:
		return fmt.Errorf("--network %q: want none or egress", f.mode)
	}
}

func newNetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "net",
		Short: "Show and change an egress sandbox's host rules (effective at once)",
	}
	change := func(use, short string, fn func(p *api.NetworkPolicy, hosts []string)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " SANDBOX HOST...",
			Short: short,
			Args:  cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := g.client()
				p, err := c.Network(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fn(p, args[1:])
				out, err := c.SetNetworkRules(cmd.Context(), args[0], api.UpdateNetworkRequest{AllowHosts: p.AllowHosts, DenyHosts: p.DenyHosts, Ports: p.Ports})
				if err != nil {
					return err
				}
				return printPolicy(cmd, out)
			},
		}
	}
	cmd.AddCommand(
		change("allow", "Allow hosts (and drop them from the deny rules)", func(p *api.NetworkPolicy, hosts []string) {
			p.DenyHosts = without(p.DenyHosts, hosts)
			p.AllowHosts = union(p.AllowHosts, hosts)
		}),
		change("deny", "Deny hosts (and drop them from the allow rules)", func(p *api.NetworkPolicy, hosts []string) {
			p.AllowHosts = without(p.AllowHosts, hosts)
			p.DenyHosts = union(p.DenyHosts, hosts)
		}),
		&cobra.Command{
			Use:   "show SANDBOX",
			Short: "Show a sandbox's network mode and host rules",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				p, err := g.client().Network(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printPolicy(cmd, p)
			},
		},
		newNetInjectCmd(g),   // secrets.go
		newNetUninjectCmd(g), // secrets.go
	)
	return cmd
}

func printPolicy(cmd *cobra.Command, p *api.NetworkPolicy) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "mode: %s\n", p.Mode)
	if p.Mode == api.NetworkEgress {
		fmt.Fprintf(w, "allow: %s\n", strings.Join(p.AllowHosts, " "))
		fmt.Fprintf(w, "deny: %s\n", strings.Join(p.DenyHosts, " "))
		printInjections(w, p) // secrets.go
	}
	return nil
}

func without(list, drop []string) []string {
	out := []string{}
	for _, h := range list {
		if !slices.Contains(drop, strings.ToLower(h)) && !slices.Contains(drop, h) {
			out = append(out, h)
		}
	}
	return out
}

func union(list, add []string) []string {
	out := append([]string{}, list...)
	for _, h := range add {
		if !slices.Contains(out, strings.ToLower(h)) {
			out = append(out, h)
		}
	}
	return out
}

func registerExecGrant(cmd *cobra.Command, f *execFlags) {
	cmd.Flags().StringArrayVar(&f.allowHosts, "allow-host", nil, "egress sandboxes: allow this host or glob while this command runs (repeatable)")
}
