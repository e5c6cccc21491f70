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
	// Source NAT of forwarded packets, just ahead of the host's own (100).
	nftSNATPriority = 90
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
	// Address rules: a sandbox's veth . its address . a destination
	// prefix it may reach directly (forwarded, any port).
	b.WriteString("\tset direct {\n\t\ttype ifname . ipv4_addr . ipv4_addr\n\t\tflags interval\n\t}\n")
	// Packets from our interfaces, and packets to our range from any
	// other (the host itself over lo, a LAN neighbour routing the range
	// here), go to sandbox_in.
	fmt.Fprintf(&b, "\tchain input {\n\t\ttype filter hook input priority %d; policy accept;\n\t\tiifname \"%s*\" jump sandbox_in\n\t\tip daddr %s jump sandbox_in\n\t}\n", nftFilterPriority, f.ifPrefix, f.rng)
	// Only traffic a sandbox's veth, source and gateway agree on is
	// accepted; anything else, IPv6 included (ip saddr matches IPv4
	// only), drops.
	b.WriteString("\tchain sandbox_in {\n\t\tiifname . ip saddr . ip daddr . meta l4proto . th dport @allow accept\n\t\tdrop\n\t}\n")
	// Forwarded only: a sandbox's packets to a destination its address
	// rules allow (looked up on every packet, so a removed rule stops an
	// open connection too), and the replies of those connections.
	fmt.Fprintf(&b, "\tchain forward {\n\t\ttype filter hook forward priority %d; policy accept;\n\t\tiifname . ip saddr . ip daddr @direct accept\n\t\tct direction reply oifname . ip daddr . ip saddr @direct accept\n\t\tiifname \"%s*\" drop\n\t\toifname \"%s*\" drop\n\t\tip daddr %s drop\n\t}\n", nftFilterPriority, f.ifPrefix, f.ifPrefix, f.rng)
	// What is forwarded leaves with the host's address: the range is
	// the daemon's own and nobody outside routes it back.
	fmt.Fprintf(&b, "\tchain postrouting {\n\t\ttype nat hook postrouting priority %d; policy accept;\n\t\tip saddr %s oifname != \"%s*\" masquerade\n\t}\n", nftSNATPriority, f.rng, f.ifPrefix)
	fmt.Fprintf(&b, "\tchain prerouting {\n\t\ttype nat hook prerouting priority %d; policy accept;\n\t\tiifname \"%s*\" jump sandbox_nat\n\t}\n", nftNATPriority, f.ifPrefix)
	// Programs that ignore HTTP_PROXY and connect straight out on 80/443
	// land on the transparent proxy; any DNS server they name is
	// answered by Paddock's. An interface without a gateway element
	// matches nothing here and its packets drop in sandbox_in.
	// A destination an address rule allows is reached as addressed, any
	// port, DNS included: no redirect.
	fmt.Fprintf(&b, "\tchain sandbox_nat {\n\t\tiifname . ip saddr . ip daddr @direct accept\n\t\ttcp dport { 80, 443 } dnat ip to iifname map @gateways : %d\n\t\tmeta l4proto { tcp, udp } th dport 53 dnat ip to iifname map @gateways : %d\n\t}\n", p.Transparent, p.DNS)
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
	out := fmt.Sprintf("%s element inet %s allow { %s }\n%s element inet %s gateways { %s }\n",
		op, f.table, strings.Join(allow, ", "), op, f.table, gw)
	return out + f.directElements(op, l, l.Direct)
}

// directElements are the elements of a sandbox's address rules; direct
// are disjoint prefixes (an interval set refuses overlapping elements).
func (f *nftFirewall) directElements(op string, l Link, direct []netip.Prefix) string {
	if len(direct) == 0 {
		return ""
	}
	comment := ""
	if op == "add" {
		comment = fmt.Sprintf(" comment \"paddock:%s\"", l.ID)
	}
	els := make([]string, 0, len(direct))
	for _, p := range direct {
		els = append(els, fmt.Sprintf("%q . %s . %s%s", l.HostIf, l.Addr, p.Masked(), comment))
	}
	return fmt.Sprintf("%s element inet %s direct { %s }\n", op, f.table, strings.Join(els, ", "))
}

// setDirect replaces a sandbox's address rules (from old to l.Direct) in
// one transaction; adding the old elements first makes deleting them
// safe whether or not they are there.
func (f *nftFirewall) setDirect(ctx context.Context, l Link, old []netip.Prefix, all func() []Link) error {
	script := f.directElements("add", l, old) + f.directElements("delete", l, old) + f.directElements("add", l, l.Direct)
	if script == "" {
		return nil
	}
	if err := nft(ctx, script); err != nil {
		// The set holds something the record does not say (or the table
		// is gone): rebuild the table from every record, l's new rules
		// included.
		return nft(ctx, f.script(all()))
	}
	return nil
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
