package netns

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"time"
)

// Firewall backends; FirewallAuto picks one when the manager is built.
const (
	FirewallAuto     = "auto"
	FirewallNftables = "nftables"
	FirewallIptables = "iptables"
)

// firewall installs the policy that a sandbox's veth may reach only the
// proxy and resolver on its own gateway. Both backends implement exactly
// the same policy; they differ only in where the rules live.
type firewall interface {
	Name() string
	// reset starts from no sandbox: everything from Paddock's interfaces
	// drops until add is called for the sandboxes that keep a network.
	reset(ctx context.Context) error
	// add is idempotent and repairs the base rules if they went missing;
	// all lists every sandbox the daemon has, for a rebuild.
	add(ctx context.Context, l Link, all func() []Link) error
	// setDirect replaces l's address rules, from old to l.Direct.
	setDirect(ctx context.Context, l Link, old []netip.Prefix, all func() []Link) error
	// remove is idempotent.
	remove(ctx context.Context, l Link) error
	// close removes everything of this daemon's tag.
	close(ctx context.Context) error
}

// ParseFirewall validates a PADDOCK_FIREWALL value ("" means auto).
func ParseFirewall(s string) (string, error) {
	switch s {
	case "", FirewallAuto:
		return FirewallAuto, nil
	case FirewallNftables, FirewallIptables:
		return s, nil
	}
	return "", fmt.Errorf("firewall %q: want auto, nftables or iptables", s)
}

// probe is what backend selection asks of the host; a field so tests can
// stand in for hosts they are not.
type probe struct {
	nftWorks func(ctx context.Context) bool
	iptFound func() bool
}

var hostProbe = probe{
	// The binary alone is not enough: a kernel without nf_tables, or a
	// container without CAP_NET_ADMIN, fails here.
	nftWorks: func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return run(ctx, "nft", "list", "tables") == nil
	},
	// The iptables backend changes its chains with the restore commands
	// (one commit each) and keeps IPv6 chains too; Debian's iptables
	// package ships all four.
	iptFound: func() bool {
		for _, bin := range []string{"iptables", "iptables-restore", "ip6tables", "ip6tables-restore"} {
			if _, err := exec.LookPath(bin); err != nil {
				return false
			}
		}
		return true
	},
}

// selectFirewall resolves want (auto, nftables or iptables) against the
// host: auto prefers nftables when `nft list tables` works.
func selectFirewall(ctx context.Context, want string, p probe) (string, error) {
	want, err := ParseFirewall(want)
	if err != nil {
		return "", err
	}
	switch want {
	case FirewallNftables:
		if !p.nftWorks(ctx) {
			return "", fmt.Errorf("firewall nftables: `nft list tables` fails: install nftables (and run as root)")
		}
		return want, nil
	case FirewallIptables:
		if !p.iptFound() {
			return "", fmt.Errorf("firewall iptables: iptables not found (needs iptables, iptables-restore, ip6tables and ip6tables-restore: Debian package iptables)")
		}
		return want, nil
	}
	if p.nftWorks(ctx) {
		return FirewallNftables, nil
	}
	if p.iptFound() {
		return FirewallIptables, nil
	}
	return "", fmt.Errorf("no firewall: networking needs nftables (nft) or iptables")
}
