package netns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// iptablesFirewall keeps every Paddock rule in three chains of its own,
// hooked first into INPUT, FORWARD and PREROUTING, so a restart can flush
// them without touching anyone else's rules.
type iptablesFirewall struct {
	ifPrefix                    string
	chainIn, chainFwd, chainNAT string
	ports                       Ports
}

func newIptables(tag string, ports Ports) *iptablesFirewall {
	return &iptablesFirewall{
		ifPrefix: "pd" + tag,
		chainIn:  chainInput + tag, chainFwd: chainForward + tag, chainNAT: chainNAT + tag,
		ports: ports,
	}
}

func (f *iptablesFirewall) Name() string { return FirewallIptables }

func (f *iptablesFirewall) chains() [][2]string {
	return [][2]string{{"filter", f.chainIn}, {"filter", f.chainFwd}, {"nat", f.chainNAT}}
}

func (f *iptablesFirewall) reset(ctx context.Context) error { return f.initChains(ctx, true) }

func (f *iptablesFirewall) add(ctx context.Context, l Link, _ func() []Link) error {
	if err := f.initChains(ctx, false); err != nil {
		return err
	}
	for _, r := range f.rules(l) {
		_ = ipt(ctx, append([]string{"-t", r[0], "-D"}, r[1:]...)...)
		if err := ipt(ctx, append([]string{"-t", r[0], "-I"}, r[1:]...)...); err != nil {
			return err
		}
	}
	return nil
}

func (f *iptablesFirewall) remove(ctx context.Context, l Link) error {
	for _, r := range f.rules(l) {
		for ipt(ctx, append([]string{"-t", r[0], "-D"}, r[1:]...)...) == nil {
		}
	}
	return nil
}

// present reports whether any of this daemon's chains exist (a host that
// switched backends may have them left over).
func (f *iptablesFirewall) present(ctx context.Context) bool {
	for _, c := range f.chains() {
		if ipt(ctx, "-t", c[0], "-S", c[1]) == nil {
			return true
		}
	}
	return false
}

func (f *iptablesFirewall) close(ctx context.Context) error {
	_ = ipt(ctx, "-t", "filter", "-D", "INPUT", "-i", f.ifPrefix+"+", "-j", f.chainIn)
	_ = ipt(ctx, "-t", "filter", "-D", "FORWARD", "-i", f.ifPrefix+"+", "-j", f.chainFwd)
	_ = ipt(ctx, "-t", "filter", "-D", "FORWARD", "-o", f.ifPrefix+"+", "-j", f.chainFwd)
	_ = ipt(ctx, "-t", "nat", "-D", "PREROUTING", "-i", f.ifPrefix+"+", "-j", f.chainNAT)
	var errs []error
	for _, c := range f.chains() {
		_ = ipt(ctx, "-t", c[0], "-F", c[1])
		if err := ipt(ctx, "-t", c[0], "-X", c[1]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func ipt(ctx context.Context, args ...string) error {
	return run(ctx, "iptables", append([]string{"-w", "5"}, args...)...)
}

// initChains creates the chains and hooks them first in the built-in
// chains. With flush it empties them (a new daemon starts from no sandbox
// rules); without, it only repairs what is missing (another daemon on the
// same range may have removed them on its way out).
func (f *iptablesFirewall) initChains(ctx context.Context, flush bool) error {
	for _, c := range f.chains() {
		_ = ipt(ctx, "-t", c[0], "-N", c[1])
		if !flush {
			continue
		}
		if err := ipt(ctx, "-t", c[0], "-F", c[1]); err != nil {
			return err
		}
	}
	hooks := [][]string{
		{"-t", "filter", "INPUT", "-i", f.ifPrefix + "+", "-j", f.chainIn},
		{"-t", "filter", "FORWARD", "-i", f.ifPrefix + "+", "-j", f.chainFwd},
		{"-t", "filter", "FORWARD", "-o", f.ifPrefix + "+", "-j", f.chainFwd},
		{"-t", "nat", "PREROUTING", "-i", f.ifPrefix + "+", "-j", f.chainNAT},
	}
	for _, h := range hooks {
		spec := append([]string{h[0], h[1], "-C"}, h[2:]...)
		if ipt(ctx, spec...) == nil {
			continue
		}
		ins := append([]string{h[0], h[1], "-I", h[2], "1"}, h[3:]...)
		if err := ipt(ctx, ins...); err != nil {
			return err
		}
	}
	// Whatever a sandbox's own rules do not accept ends here; sandbox
	// rules are inserted above.
	for _, c := range []string{f.chainIn, f.chainFwd} {
		if !flush && ipt(ctx, "-C", c, "-j", "DROP") == nil {
			continue
		}
		if err := ipt(ctx, "-A", c, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// rules are the sandbox's own rules: {table, chain, spec...}. Inserted at
// the top of their chain, ahead of the chain's final DROP.
func (f *iptablesFirewall) rules(l Link) [][]string {
	src, gw := l.Addr.String()+"/32", l.Gateway.String()
	p := f.ports
	tag := []string{"-m", "comment", "--comment", "paddock:" + l.ID}
	tcpPorts := fmt.Sprintf("%d,%d,%d", p.Proxy, p.Transparent, p.DNS)
	return [][]string{
		append([]string{"filter", f.chainIn, "-i", l.HostIf, "-s", src, "-d", gw, "-p", "tcp", "-m", "multiport", "--dports", tcpPorts, "-j", "ACCEPT"}, tag...),
		append([]string{"filter", f.chainIn, "-i", l.HostIf, "-s", src, "-d", gw, "-p", "udp", "--dport", strconv.Itoa(p.DNS), "-j", "ACCEPT"}, tag...),
		// Programs that ignore HTTP_PROXY and connect straight out on
		// 80/443 land on the transparent proxy; any DNS server they name
		// is answered by Paddock's.
		append([]string{"nat", f.chainNAT, "-i", l.HostIf, "-p", "tcp", "-m", "multiport", "--dports", "80,443", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", gw, p.Transparent)}, tag...),
		append([]string{"nat", f.chainNAT, "-i", l.HostIf, "-p", "udp", "--dport", "53", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", gw, p.DNS)}, tag...),
		append([]string{"nat", f.chainNAT, "-i", l.HostIf, "-p", "tcp", "--dport", "53", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", gw, p.DNS)}, tag...),
	}
}
