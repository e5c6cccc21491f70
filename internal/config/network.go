package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/netns"
)

// Bounds on the network settings: they are read from the environment and
// end up in firewall rules and the resolver, so none may grow without end.
const (
	maxEgressMaxConns   = 1 << 20
	maxPermitPrefixes   = 1024
	maxStaticNames      = 1024
	maxStaticAddrsEach  = 64
	minNetworkRangeBits = 28 // a /28 holds four sandboxes' /30s
)

// Network configures sandboxes' egress networking on the local backend
// (docs/networking.md). A sandbox created with a network policy gets its
// own namespace, a /30 from Range, and the egress proxy and resolver as
// its only way out.
type Network struct {
	// Range is the IPv4 prefix sandboxes' /30s come from
	// ($PADDOCK_NETWORK_RANGE, default 100.96.0.0/11). Daemons sharing a
	// host need ranges that do not overlap: each claims its own and
	// refuses to start on another's.
	Range netip.Prefix `json:"range"`
	// Firewall is the packet filter backend ($PADDOCK_FIREWALL): auto
	// (nftables if `nft list tables` works, else iptables), nftables or
	// iptables.
	Firewall string `json:"firewall"`
	// DNSUpstream is the ip:port the resolver forwards allowed names to
	// ($PADDOCK_EGRESS_DNS_UPSTREAM); "" = the host's first nameserver.
	DNSUpstream string `json:"dns_upstream,omitempty"`
	// DNSStatic are fixed answers the resolver gives ahead of the upstream
	// ($PADDOCK_EGRESS_DNS_STATIC, "name=ip[,ip];name=ip").
	DNSStatic map[string][]netip.Addr `json:"dns_static,omitempty"`
	// Permit are prefixes exempt from the ranges the proxy never connects
	// to (private, loopback, link-local...) ($PADDOCK_EGRESS_PERMIT,
	// comma-separated): an internal mirror, or a test's upstream.
	Permit []netip.Prefix `json:"permit,omitempty"`
	// UpstreamCA is a PEM file of extra CAs trusted for intercepted
	// upstreams ($PADDOCK_EGRESS_UPSTREAM_CA), beside the system's.
	UpstreamCA string `json:"upstream_ca,omitempty"`
	// MaxConns bounds each sandbox's open proxy connections
	// ($PADDOCK_EGRESS_MAX_CONNS).
	MaxConns int `json:"max_conns"`
}

func defaultNetwork() Network {
	return Network{Range: netns.DefaultRange, Firewall: netns.FirewallAuto, MaxConns: egress.DefaultMaxConns}
}

// applyNetworkEnv reads the network settings. Syntax errors name the
// variable; Validate checks what the values mean.
func (c *Config) applyNetworkEnv(getenv func(string) string) error {
	n := &c.Network
	if v := strings.TrimSpace(getenv("PADDOCK_NETWORK_RANGE")); v != "" {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_NETWORK_RANGE: %w", err)
		}
		n.Range = p
	}
	if v := getenv("PADDOCK_FIREWALL"); v != "" {
		n.Firewall = v
	}
	if v := getenv("PADDOCK_EGRESS_DNS_UPSTREAM"); v != "" {
		n.DNSUpstream = v
	}
	if v := getenv("PADDOCK_EGRESS_DNS_STATIC"); v != "" {
		m, err := egress.ParseStatic(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_EGRESS_DNS_STATIC: %w", err)
		}
		n.DNSStatic = m
	}
	if v := getenv("PADDOCK_EGRESS_PERMIT"); v != "" {
		var permit []netip.Prefix
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return fmt.Errorf("PADDOCK_EGRESS_PERMIT: %w", err)
			}
			permit = append(permit, p)
		}
		n.Permit = permit
	}
	if v := getenv("PADDOCK_EGRESS_UPSTREAM_CA"); v != "" {
		// The daemon always read it relative to where it was started.
		abs, err := filepath.Abs(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_EGRESS_UPSTREAM_CA: %w", err)
		}
		n.UpstreamCA = abs
	}
	if v := getenv("PADDOCK_EGRESS_MAX_CONNS"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_EGRESS_MAX_CONNS: want a number from 1 to %d, got %.32q", maxEgressMaxConns, v)
		}
		n.MaxConns = m
	}
	return nil
}

func (c *Config) validateNetwork() []error {
	var errs []error
	n := c.Network
	if !n.Range.IsValid() || !n.Range.Addr().Is4() || n.Range.Bits() > minNetworkRangeBits {
		errs = append(errs, fmt.Errorf("network range %s (PADDOCK_NETWORK_RANGE): want an IPv4 prefix of /%d or wider", n.Range, minNetworkRangeBits))
	}
	if _, err := netns.ParseFirewall(n.Firewall); err != nil || n.Firewall == "" {
		errs = append(errs, fmt.Errorf("network firewall %.32q (PADDOCK_FIREWALL): want auto, nftables or iptables", n.Firewall))
	}
	if n.DNSUpstream != "" {
		if _, err := netip.ParseAddrPort(n.DNSUpstream); err != nil {
			errs = append(errs, fmt.Errorf("network dns_upstream (PADDOCK_EGRESS_DNS_UPSTREAM): want ip:port: %w", err))
		}
	}
	errs = append(errs, validateStatic(n.DNSStatic)...)
	if len(n.Permit) > maxPermitPrefixes {
		errs = append(errs, fmt.Errorf("network permit (PADDOCK_EGRESS_PERMIT): %d prefixes, at most %d", len(n.Permit), maxPermitPrefixes))
	}
	for _, p := range n.Permit {
		if !p.IsValid() {
			errs = append(errs, errors.New("network permit (PADDOCK_EGRESS_PERMIT): an invalid prefix"))
			break
		}
	}
	if n.UpstreamCA != "" {
		if !filepath.IsAbs(n.UpstreamCA) {
			errs = append(errs, fmt.Errorf("network upstream_ca %q (PADDOCK_EGRESS_UPSTREAM_CA) must be an absolute path", n.UpstreamCA))
		} else if fi, err := os.Stat(n.UpstreamCA); err != nil {
			errs = append(errs, fmt.Errorf("network upstream_ca (PADDOCK_EGRESS_UPSTREAM_CA): %w", err))
		} else if !fi.Mode().IsRegular() {
			errs = append(errs, fmt.Errorf("network upstream_ca %q (PADDOCK_EGRESS_UPSTREAM_CA) is not a regular file", n.UpstreamCA))
		}
	}
	if n.MaxConns < 1 || n.MaxConns > maxEgressMaxConns {
		errs = append(errs, fmt.Errorf("network max_conns %d (PADDOCK_EGRESS_MAX_CONNS): want a number from 1 to %d", n.MaxConns, maxEgressMaxConns))
	}
	return errs
}

// validateStatic checks the static answers however they were given: the
// names as the resolver matches them, and at least one address each.
func validateStatic(m map[string][]netip.Addr) []error {
	if len(m) > maxStaticNames {
		return []error{fmt.Errorf("network dns_static (PADDOCK_EGRESS_DNS_STATIC): %d names, at most %d", len(m), maxStaticNames)}
	}
	var errs []error
	for name, addrs := range m {
		if h, err := egress.NormalizeHost(name); err != nil || h != name {
			errs = append(errs, fmt.Errorf("network dns_static (PADDOCK_EGRESS_DNS_STATIC): name %.64q: want a lower-case host name", name))
			continue
		}
		if len(addrs) == 0 || len(addrs) > maxStaticAddrsEach {
			errs = append(errs, fmt.Errorf("network dns_static (PADDOCK_EGRESS_DNS_STATIC): name %s: want 1 to %d addresses, got %d", name, maxStaticAddrsEach, len(addrs)))
			continue
		}
		for _, a := range addrs {
			if !a.IsValid() {
				errs = append(errs, fmt.Errorf("network dns_static (PADDOCK_EGRESS_DNS_STATIC): name %s: an invalid address", name))
				break
			}
		}
	}
	return errs
}
