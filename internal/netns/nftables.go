package netns

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// Priorities of the nftables base chains: just ahead of the host's own
// filter (0) and destination NAT (-100) chains, so our drops and
// redirects are seen first whatever the host adds at the usual places.
const (
	nftFilterPriority = -10
	nftNATPriority    = -110
)

// nftFirewall keeps all of a daemon's rules in one table,
// inet paddock_<tag>. The chains never change after the table is built:
// a sandbox is a handful of set and map elements, so adding or removing
// one is an element transaction, not a chain rewrite.
type nftFirewall struct {
	table    string // "paddock_<tag>", in family inet
	ifPrefix string
	rng      netip.Prefix
	ports    Ports
}

func newNft(tag string, rng netip.Prefix, ports Ports) *nftFirewall {
	return &nftFirewall{table: "paddock_" + tag, ifPrefix: "pd" + tag, rng: rng.Masked(), ports: ports}
}

func (f *nftFirewall) Name() string { return FirewallNftables }

// nft feeds a script to `nft -f -`; a script is one transaction, so a
// failure leaves the ruleset as it was.
func nft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft -f: %v: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (f *nftFirewall) exists(ctx context.Context) bool {
	return run(ctx, "nft", "list", "table", "inet", f.table) == nil
}

// script builds the whole table, replacing any table of the name, with
// the elements of the given sandboxes.
func (f *nftFirewall) script(links []Link) string {
	var b strings.Builder
	p := f.ports
	// "add" first so that "delete" cannot fail on a host without the table.
	fmt.Fprintf(&b, "add table inet %s\ndelete table inet %s\n", f.table, f.table)
	fmt.Fprintf(&b, "table inet %s {\n", f.table)
	b.WriteString("\tset allow {\n\t\ttype ifname . ipv4_addr . ipv4_addr . inet_proto . inet_service\n\t}\n")
	b.WriteString("\tmap gateways {\n\t\ttype ifname : ipv4_addr\n\t}\n")
	// Packets from our interfaces, and packets to our range from any
	// other (the host itself over lo, a LAN neighbour routing the range
	// here), go to sandbox_in.
	fmt.Fprintf(&b, "\tchain input {\n\t\ttype filter hook input priority %d; policy accept;\n\t\tiifname \"%s*\" jump sandbox_in\n\t\tip daddr %s jump sandbox_in\n\t}\n", nftFilterPriority, f.ifPrefix, f.rng)
	// Only traffic a sandbox's veth, source and gateway agree on is
	// accepted; anything else, IPv6 included (ip saddr matches IPv4
	// only), drops.
	b.WriteString("\tchain sandbox_in {\n\t\tiifname . ip saddr . ip daddr . meta l4proto . th dport @allow accept\n\t\tdrop\n\t}\n")
	fmt.Fprintf(&b, "\tchain forward {\n\t\ttype filter hook forward priority %d; policy accept;\n\t\tiifname \"%s*\" drop\n\t\toifname \"%s*\" drop\n\t\tip daddr %s drop\n\t}\n", nftFilterPriority, f.ifPrefix, f.ifPrefix, f.rng)
	fmt.Fprintf(&b, "\tchain prerouting {\n\t\ttype nat hook prerouting priority %d; policy accept;\n\t\tiifname \"%s*\" jump sandbox_nat\n\t}\n", nftNATPriority, f.ifPrefix)
	// Programs that ignore HTTP_PROXY and connect straight out on 80/443
	// land on the transparent proxy; any DNS server they name is
	// answered by Paddock's. An interface without a gateway element
	// matches nothing here and its packets drop in sandbox_in.
	fmt.Fprintf(&b, "\tchain sandbox_nat {\n\t\ttcp dport { 80, 443 } dnat ip to iifname map @gateways : %d\n\t\tmeta l4proto { tcp, udp } th dport 53 dnat ip to iifname map @gateways : %d\n\t}\n", p.Transparent, p.DNS)
	b.WriteString("}\n")
	for _, l := range links {
		b.WriteString(f.elements("add", l))
	}
	return b.String()
}

// elements are one sandbox's set and map elements, as op ("add" or
// "delete") commands.
func (f *nftFirewall) elements(op string, l Link) string {
	p := f.ports
	comment := ""
	if op == "add" {
		comment = fmt.Sprintf(" comment \"paddock:%s\"", l.ID)
	}
	key := fmt.Sprintf("%q . %s . %s", l.HostIf, l.Addr, l.Gateway)
	var allow []string
	for _, e := range []struct {
		proto string
		port  int
	}{{"tcp", p.Proxy}, {"tcp", p.Transparent}, {"tcp", p.DNS}, {"udp", p.DNS}} {
		allow = append(allow, fmt.Sprintf("%s . %s . %d%s", key, e.proto, e.port, comment))
	}
	gw := fmt.Sprintf("%q%s", l.HostIf, comment)
	if op == "add" {
		gw += " : " + l.Gateway.String()
	}
	return fmt.Sprintf("%s element inet %s allow { %s }\n%s element inet %s gateways { %s }\n",
		op, f.table, strings.Join(allow, ", "), op, f.table, gw)
}

func (f *nftFirewall) reset(ctx context.Context) error { return nft(ctx, f.script(nil)) }

func (f *nftFirewall) add(ctx context.Context, l Link, all func() []Link) error {
	err := nft(ctx, f.elements("add", l))
	if err == nil {
		return nil
	}
	if f.exists(ctx) {
		return err
	}
	// Gone (an operator or a host firewall reload removed it): rebuild
	// it with every sandbox this daemon has.
	return nft(ctx, f.script(all()))
}

func (f *nftFirewall) remove(ctx context.Context, l Link) error {
	// "add" before "delete" makes removal idempotent in one transaction:
	// deleting an absent element would fail the whole script.
	err := nft(ctx, f.elements("add", l)+f.elements("delete", l))
	if err != nil && !f.exists(ctx) {
		return nil
	}
	return err
}

func (f *nftFirewall) close(ctx context.Context) error {
	if !f.exists(ctx) {
		return nil
	}
	return nft(ctx, fmt.Sprintf("delete table inet %s\n", f.table))
}
