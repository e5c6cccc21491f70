package config

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNetworkEnv(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	env := map[string]string{
		"PADDOCK_NETWORK_RANGE":       "10.200.0.0/16",
		"PADDOCK_FIREWALL":            "nftables",
		"PADDOCK_EGRESS_DNS_UPSTREAM": "127.0.0.1:9",
		"PADDOCK_EGRESS_DNS_STATIC":   "Up.Test=198.18.0.1,198.18.0.2; other.test=198.18.0.3",
		"PADDOCK_EGRESS_PERMIT":       " 198.18.0.0/30, ,169.254.0.0/16",
		"PADDOCK_EGRESS_UPSTREAM_CA":  ca,
		"PADDOCK_EGRESS_MAX_CONNS":    "64",
	}
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	n := c.Network
	if n.Range != netip.MustParsePrefix("10.200.0.0/16") || n.Firewall != "nftables" || n.DNSUpstream != "127.0.0.1:9" ||
		n.UpstreamCA != ca || n.MaxConns != 64 {
		t.Errorf("network = %+v", n)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/30"), netip.MustParsePrefix("169.254.0.0/16")}; !slices.Equal(n.Permit, want) {
		t.Errorf("permit = %v, want %v", n.Permit, want)
	}
	if got := n.DNSStatic["up.test"]; len(got) != 2 || got[1] != netip.MustParseAddr("198.18.0.2") || len(n.DNSStatic["other.test"]) != 1 {
		t.Errorf("dns static = %v", n.DNSStatic)
	}
	// What --print-config shows.
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"range":"10.200.0.0/16"`, `"firewall":"nftables"`, `"permit":["198.18.0.0/30","169.254.0.0/16"]`, `"max_conns":64`, `"up.test":["198.18.0.1","198.18.0.2"]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("printed config lacks %s:\n%s", want, b)
		}
	}
}

func TestNetworkDefaults(t *testing.T) {
	c := Default()
	if err := c.ApplyEnv(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	n := c.Network
	if n.Range.String() != "100.96.0.0/11" || n.Firewall != "auto" || n.MaxConns != 512 || n.DNSUpstream != "" || n.Permit != nil || n.DNSStatic != nil {
		t.Errorf("defaults = %+v", n)
	}
}

// TestNetworkEnvErrors: every bad value fails, in ApplyEnv (syntax) or
// Validate (meaning), with an error that names the variable.
func TestNetworkEnvErrors(t *testing.T) {
	for _, tt := range []struct {
		env, value, want string
	}{
		{"PADDOCK_NETWORK_RANGE", "100.96.0.0", "PADDOCK_NETWORK_RANGE"},
		{"PADDOCK_NETWORK_RANGE", "10.0.0.0/30", "want an IPv4 prefix of /28 or wider"},
		{"PADDOCK_NETWORK_RANGE", "fd00::/64", "want an IPv4 prefix"},
		{"PADDOCK_FIREWALL", "nft", `network firewall "nft" (PADDOCK_FIREWALL): want auto, nftables or iptables`},
		{"PADDOCK_FIREWALL", "iptables;rm -rf /", "want auto, nftables or iptables"},
		{"PADDOCK_EGRESS_DNS_UPSTREAM", "example.test:53", "PADDOCK_EGRESS_DNS_UPSTREAM): want ip:port"},
		{"PADDOCK_EGRESS_DNS_UPSTREAM", "127.0.0.1", "want ip:port"},
		{"PADDOCK_EGRESS_DNS_STATIC", "up.test", "PADDOCK_EGRESS_DNS_STATIC"},
		{"PADDOCK_EGRESS_DNS_STATIC", "up.test=not-an-ip", "PADDOCK_EGRESS_DNS_STATIC"},
		{"PADDOCK_EGRESS_PERMIT", "198.18.0.0/30,nonsense", "PADDOCK_EGRESS_PERMIT"},
		{"PADDOCK_EGRESS_UPSTREAM_CA", "/nonexistent/ca.pem", "PADDOCK_EGRESS_UPSTREAM_CA"},
		{"PADDOCK_EGRESS_UPSTREAM_CA", "/", "is not a regular file"},
		{"PADDOCK_EGRESS_MAX_CONNS", "0", "PADDOCK_EGRESS_MAX_CONNS"},
		{"PADDOCK_EGRESS_MAX_CONNS", "-3", "PADDOCK_EGRESS_MAX_CONNS"},
		{"PADDOCK_EGRESS_MAX_CONNS", "lots", "PADDOCK_EGRESS_MAX_CONNS"},
		{"PADDOCK_EGRESS_MAX_CONNS", "99999999", "want a number from 1 to 1048576"},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			c := Default()
			err := c.ApplyEnv(func(k string) string {
				if k == tt.env {
					return tt.value
				}
				return ""
			})
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestNetworkValidateDirect: a configuration built in code (not from the
// environment) is checked as strictly.
func TestNetworkValidateDirect(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*Network)
		want string
	}{
		{"zero range", func(n *Network) { n.Range = netip.Prefix{} }, "network range"},
		{"empty firewall", func(n *Network) { n.Firewall = "" }, "network firewall"},
		{"upper-case static name", func(n *Network) {
			n.DNSStatic = map[string][]netip.Addr{"Up.Test": {netip.MustParseAddr("198.18.0.1")}}
		}, "lower-case host name"},
		{"static name without address", func(n *Network) { n.DNSStatic = map[string][]netip.Addr{"up.test": nil} }, "want 1 to 64 addresses"},
		{"invalid permit", func(n *Network) { n.Permit = []netip.Prefix{{}} }, "an invalid prefix"},
		{"relative CA", func(n *Network) { n.UpstreamCA = "ca.pem" }, "must be an absolute path"},
		{"too many permits", func(n *Network) {
			n.Permit = make([]netip.Prefix, maxPermitPrefixes+1)
		}, "at most 1024"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c.Network)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
}
