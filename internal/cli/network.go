package cli

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddock-dev/paddock/api"
)

// netFlags are the network flags of create and do.
type netFlags struct {
	mode                string
	allow, deny         []string
	allowCIDR, denyCIDR []string
}

func (f *netFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.mode, "network", "", `network: "none" (default, loopback only) or "egress" (out through Paddock's proxy, to allowed hosts only)`)
	fs.StringArrayVar(&f.allow, "allow-host", nil, "with egress: allow this host or glob, e.g. pypi.org or '*.pythonhosted.org' (repeatable; implies --network egress)")
	fs.StringArrayVar(&f.deny, "deny-host", nil, "with egress: deny this host or glob; deny rules win (repeatable)")
	fs.StringArrayVar(&f.allowCIDR, "allow-cidr", nil, "with egress: let the sandbox reach this IPv4 address or CIDR block directly, any port, past the proxy (repeatable; implies --network egress)")
	fs.StringArrayVar(&f.denyCIDR, "deny-cidr", nil, "with egress: never reach this IPv4 address or CIDR block directly; wins over --allow-cidr (repeatable)")
}

func (f *netFlags) any() bool {
	return len(f.allow)+len(f.deny)+len(f.allowCIDR)+len(f.denyCIDR) > 0
}

func (f *netFlags) request(req *api.CreateSandboxRequest) error {
	mode := f.mode
	if mode == "" && f.any() {
		mode = api.NetworkEgress
	}
	switch mode {
	case "", api.NetworkNone:
		if f.any() {
			return fmt.Errorf("--allow-host, --deny-host, --allow-cidr and --deny-cidr need --network egress")
		}
		return nil
	case api.NetworkEgress:
		req.Network = &api.NetworkPolicy{Mode: mode, AllowHosts: f.allow, DenyHosts: f.deny, AllowCIDRs: f.allowCIDR, DenyCIDRs: f.denyCIDR}
		return nil
	default:
		return fmt.Errorf("--network %q: want none or egress", f.mode)
	}
}

func newNetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "net",
		Short: "Show and change an egress sandbox's host and address rules (effective at once)",
	}
	change := func(use, short string, fn func(p *api.NetworkPolicy, hosts, cidrs []string)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " SANDBOX HOST|ADDRESS|CIDR...",
			Short: short,
			Args:  cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := g.client()
				p, err := c.Network(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				hosts, cidrs := splitRules(args[1:])
				fn(p, hosts, cidrs)
				out, err := c.SetNetworkRules(cmd.Context(), args[0], api.UpdateNetworkRequest{
					AllowHosts: p.AllowHosts, DenyHosts: p.DenyHosts, AllowCIDRs: p.AllowCIDRs, DenyCIDRs: p.DenyCIDRs, Ports: p.Ports,
				})
				if err != nil {
					return err
				}
				return printPolicy(cmd, out)
			},
		}
	}
	cmd.AddCommand(
		change("allow", "Allow hosts, addresses or CIDR blocks (and drop them from the deny rules)", func(p *api.NetworkPolicy, hosts, cidrs []string) {
			p.DenyHosts = without(p.DenyHosts, hosts)
			p.AllowHosts = union(p.AllowHosts, hosts)
			p.DenyCIDRs = without(p.DenyCIDRs, cidrs)
			p.AllowCIDRs = union(p.AllowCIDRs, cidrs)
		}),
		change("deny", "Deny hosts, addresses or CIDR blocks (and drop them from the allow rules)", func(p *api.NetworkPolicy, hosts, cidrs []string) {
			p.AllowHosts = without(p.AllowHosts, hosts)
			p.DenyHosts = union(p.DenyHosts, hosts)
			p.AllowCIDRs = without(p.AllowCIDRs, cidrs)
			p.DenyCIDRs = union(p.DenyCIDRs, cidrs)
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
		if len(p.AllowCIDRs)+len(p.DenyCIDRs) > 0 {
			fmt.Fprintf(w, "allow addresses: %s\n", strings.Join(p.AllowCIDRs, " "))
			fmt.Fprintf(w, "deny addresses: %s\n", strings.Join(p.DenyCIDRs, " "))
		}
		printInjections(w, p) // secrets.go
	}
	return nil
}

// splitRules tells address rules (an IPv4 or IPv6 address, or a CIDR
// block; the daemon refuses IPv6) from host rules. Addresses are written
// as the daemon keeps them (a bare address is a /32), so that allow and
// deny can find them in the lists.
func splitRules(args []string) (hosts, cidrs []string) {
	for _, a := range args {
		if p, err := netip.ParsePrefix(a); err == nil {
			cidrs = append(cidrs, p.Masked().String())
		} else if ip, err := netip.ParseAddr(a); err == nil {
			cidrs = append(cidrs, netip.PrefixFrom(ip, ip.BitLen()).String())
		} else {
			hosts = append(hosts, a)
		}
	}
	return hosts, cidrs
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
