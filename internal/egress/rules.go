// Package egress is the only way out of a networked sandbox: an HTTP forward
// proxy (plain requests and CONNECT), a transparent proxy for direct
// connections to ports 80 and 443, and a DNS resolver. All three apply the
// sandbox's host rules: deny globs first, then allow globs, nothing else.
package egress

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Limits on rules, so a caller cannot make every lookup expensive.
const (
	MaxRules    = 256
	maxHostLen  = 253
	maxLabelLen = 63
)

// Policy is one sandbox's egress rules. The zero Policy denies everything.
type Policy struct {
	Allow []string
	Deny  []string
	// Ports are the destination ports allowed (default 80 and 443).
	Ports []int
	// Inject are credential injection rules; a host with one has its
	// HTTPS intercepted (inject.go, intercept.go).
	Inject []Injection
	// AllowCIDR and DenyCIDR are address rules (cidr.go): IPv4 prefixes
	// the sandbox reaches directly, any port, deny winning.
	AllowCIDR []string
	DenyCIDR  []string
	// Direct is what the address rules come to (DirectRoutes); the server
	// fills it in when it takes a policy.
	Direct []netip.Prefix
}

// Decision says whether a host may be reached and which rule decided.
type Decision struct {
	Allowed bool
	// Rule names what decided: "deny:<glob>", "allow:<glob>", "default-deny",
	// "direct-ip", "port", "invalid-host", and for IP literals
	// "allow-cidr:<prefix>" and "deny-cidr:<prefix>".
	Rule string
}

// NormalizeHost lowercases a host name, strips one trailing dot and checks
// it is a syntactically valid DNS name. IP literals are refused: rules are
// about names, and an IP would bypass them.
func NormalizeHost(h string) (string, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > maxHostLen {
		return "", fmt.Errorf("host name %q: empty or longer than %d bytes: %w", trunc(h), maxHostLen, errdefs.ErrInvalidArgument)
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return "", fmt.Errorf("host %q is an IP address; host rules name hosts (give addresses as address rules: allow_cidrs, --allow-cidr): %w", h, errdefs.ErrInvalidArgument)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > maxLabelLen {
			return "", fmt.Errorf("host name %q: empty or over-long label: %w", trunc(h), errdefs.ErrInvalidArgument)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host name %q: character %q not allowed: %w", trunc(h), c, errdefs.ErrInvalidArgument)
			}
		}
	}
	return h, nil
}

// NormalizeGlob checks a host rule: a host name in which a label may be "*"
// (any one or more labels when leading, exactly one label elsewhere).
func NormalizeGlob(g string) (string, error) {
	g = strings.ToLower(strings.TrimSpace(strings.TrimSuffix(g, ".")))
	if g == "*" {
		return g, nil
	}
	if strings.Count(g, "*") > 0 {
		probe := strings.ReplaceAll(g, "*", "x")
		for _, label := range strings.Split(g, ".") {
			if strings.Contains(label, "*") && label != "*" {
				return "", fmt.Errorf("host rule %q: '*' must be a whole label: %w", trunc(g), errdefs.ErrInvalidArgument)
			}
		}
		if _, err := NormalizeHost(probe); err != nil {
			return "", fmt.Errorf("host rule %q is not a host name pattern: %w", trunc(g), errdefs.ErrInvalidArgument)
		}
		return g, nil
	}
	return NormalizeHost(g)
}

// NormalizePolicy validates and canonicalises a policy.
func NormalizePolicy(p Policy) (Policy, error) {
	if len(p.Allow)+len(p.Deny) > MaxRules {
		return Policy{}, fmt.Errorf("%d host rules: at most %d: %w", len(p.Allow)+len(p.Deny), MaxRules, errdefs.ErrInvalidArgument)
	}
	if n := len(p.AllowCIDR) + len(p.DenyCIDR); n > MaxCIDRRules {
		return Policy{}, fmt.Errorf("%d address rules: at most %d: %w", n, MaxCIDRRules, errdefs.ErrInvalidArgument)
	}
	var out Policy
	var err error
	if out.AllowCIDR, err = normalizeCIDRs(p.AllowCIDR); err != nil {
		return Policy{}, err
	}
	if out.DenyCIDR, err = normalizeCIDRs(p.DenyCIDR); err != nil {
		return Policy{}, err
	}
	for _, pair := range []struct {
		in  []string
		out *[]string
	}{{p.Allow, &out.Allow}, {p.Deny, &out.Deny}} {
		seen := map[string]bool{}
		for _, g := range pair.in {
			n, err := NormalizeGlob(g)
			if err != nil {
				return Policy{}, err
			}
			if !seen[n] {
				seen[n] = true
				*pair.out = append(*pair.out, n)
			}
		}
	}
	for _, port := range p.Ports {
		if port < 1 || port > 65535 {
			return Policy{}, fmt.Errorf("port %d out of range: %w", port, errdefs.ErrInvalidArgument)
		}
		out.Ports = append(out.Ports, port)
	}
	if len(out.Ports) > 64 {
		return Policy{}, fmt.Errorf("at most 64 ports: %w", errdefs.ErrInvalidArgument)
	}
	if len(p.Inject) > MaxInjections {
		return Policy{}, fmt.Errorf("%d injection rules: at most %d: %w", len(p.Inject), MaxInjections, errdefs.ErrInvalidArgument)
	}
	for _, in := range p.Inject {
		n, err := NormalizeInjection(in)
		if err != nil {
			return Policy{}, err
		}
		// One rule per host and header: a later one replaces an earlier.
		replaced := false
		for i := range out.Inject {
			if out.Inject[i].Host == n.Host && out.Inject[i].Header == n.Header {
				out.Inject[i], replaced = n, true
			}
		}
		if !replaced {
			out.Inject = append(out.Inject, n)
		}
	}
	return out, nil
}

// MatchGlob reports whether host (normalised) matches glob (normalised).
func MatchGlob(glob, host string) bool {
	if glob == "*" {
		return true
	}
	gl := strings.Split(glob, ".")
	hl := strings.Split(host, ".")
	if gl[0] == "*" {
		// A leading "*" stands for one or more labels: "*.example.com"
		// covers "a.b.example.com" but not "example.com".
		rest := gl[1:]
		if len(hl) <= len(rest) {
			return false
		}
		return matchLabels(rest, hl[len(hl)-len(rest):])
	}
	return len(gl) == len(hl) && matchLabels(gl, hl)
}

func matchLabels(g, h []string) bool {
	for i := range g {
		if g[i] != "*" && g[i] != h[i] {
			return false
		}
	}
	return true
}

// Decide applies the policy to a host name: deny first, then allow.
func (p Policy) Decide(host string) Decision {
	h, err := NormalizeHost(host)
	if err != nil {
		if ip, ipErr := netip.ParseAddr(strings.Trim(strings.TrimSuffix(host, "."), "[]")); ipErr == nil {
			return p.decideAddr(ip)
		}
		return Decision{Rule: "invalid-host"}
	}
	for _, g := range p.Deny {
		if MatchGlob(g, h) {
			return Decision{Rule: "deny:" + g}
		}
	}
	for _, g := range p.Allow {
		if MatchGlob(g, h) {
			return Decision{Allowed: true, Rule: "allow:" + g}
		}
	}
	return Decision{Rule: "default-deny"}
}

// PortAllowed reports whether a destination port is permitted to a host
// name; an address an address rule allows may be reached on any port.
func (p Policy) PortAllowed(port int) bool {
	if len(p.Ports) == 0 {
		return port == 80 || port == 443
	}
	for _, q := range p.Ports {
		if q == port {
			return true
		}
	}
	return false
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
