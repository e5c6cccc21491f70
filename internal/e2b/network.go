package e2b

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// E2B names its egress rules by address as well as by name. Names become
// Paddock's host rules, addresses and CIDR blocks its address rules
// (reached directly, any port, never the forbidden ranges). E2B's
// ALL_TRAFFIC is special: in allowOut it is Paddock's match-all host rule,
// which still goes through the proxy, so the forbidden ranges, the ledger
// and the DNS control apply to every host it lets through; in denyOut it
// is what Paddock does anyway to every host and address no rule allows.
const (
	allTraffic = "0.0.0.0/0"
	matchAll   = "*"
)

// Bounds on E2B's network options, which are outside input.
const (
	maxRuleHosts   = 64
	maxHTTPSPorts  = 32
	maxMaskHostLen = 200
)

// egressSpec is E2B's egress options, checked and in Paddock's terms.
type egressSpec struct {
	allowAll, denyAll   bool
	allow, deny         []string // normalised host names and globs
	allowCIDR, denyCIDR []string // normalised IPv4 prefixes
	inject              []api.Injection
	given               bool // any of allowOut, denyOut or rules was given
}

// parseEgress checks allowOut, denyOut, rules and egressProxy.
func parseEgress(allowOut, denyOut []string, rules map[string][]networkRule, egressProxy []byte) (egressSpec, error) {
	var s egressSpec
	if p := bytes.TrimSpace(egressProxy); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		return s, errdefs.Invalid("network.egressProxy is not supported: a Paddock sandbox leaves only through the daemon's own egress proxy, never through another one")
	}
	if len(allowOut)+len(denyOut) > egress.MaxRules {
		return s, errdefs.Invalid("network: %d allowOut and denyOut entries, at most %d", len(allowOut)+len(denyOut), egress.MaxRules)
	}
	var err error
	if s.allow, s.allowCIDR, s.allowAll, err = hostRules("allowOut", allowOut); err != nil {
		return s, err
	}
	if s.deny, s.denyCIDR, s.denyAll, err = hostRules("denyOut", denyOut); err != nil {
		return s, err
	}
	for _, h := range s.allow {
		if slices.Contains(s.deny, h) {
			return s, errdefs.Invalid("network: %q is in both allowOut and denyOut; E2B lets allowOut win and Paddock lets denyOut win, so list it in one of them", h)
		}
	}
	// Where an allowOut block and a denyOut block overlap, E2B lets
	// allowOut win; Paddock's address rules let deny win, so the allowed
	// blocks are carved out of the denied ones here.
	if s.denyCIDR, err = carveCIDRs(s.denyCIDR, s.allowCIDR); err != nil {
		return s, err
	}
	if n := len(s.allowCIDR) + len(s.denyCIDR); n > egress.MaxCIDRRules {
		return s, errdefs.Invalid("network: allowOut's blocks carved out of denyOut's leave %d address rules, at most %d; use fewer or wider blocks", n, egress.MaxCIDRRules)
	}
	if s.inject, err = transformRules(rules); err != nil {
		return s, err
	}
	s.given = len(allowOut) > 0 || len(denyOut) > 0 || len(rules) > 0
	return s, nil
}

// hostRules normalises one list: host names and globs, IPv4 addresses
// and CIDR blocks, or ALL_TRAFFIC.
func hostRules(field string, entries []string) (hosts, cidrs []string, all bool, err error) {
	for _, raw := range entries {
		e := strings.TrimSpace(raw)
		if e == allTraffic || e == matchAll {
			all = true
			continue
		}
		if isAddress(e) {
			p, perr := egress.NormalizeCIDR(strings.Trim(e, "[]"))
			if perr != nil {
				return nil, nil, false, fmt.Errorf("network.%s: %w", field, perr)
			}
			if c := p.String(); !slices.Contains(cidrs, c) {
				cidrs = append(cidrs, c)
			}
			continue
		}
		h, gerr := egress.NormalizeGlob(e)
		if gerr != nil {
			return nil, nil, false, fmt.Errorf("network.%s: %w", field, gerr)
		}
		if h == matchAll {
			all = true
			continue
		}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts, cidrs, all, nil
}

// carveCIDRs returns the IPv4 blocks of deny less every block of allow,
// as the fewest prefixes: a deny block inside an allow block goes, and one
// that holds an allow block is split around it (at most 32 prefixes for
// each allow block it holds). Both lists are normalised prefixes.
func carveCIDRs(deny, allow []string) ([]string, error) {
	cur := make([]netip.Prefix, 0, len(deny))
	for _, d := range deny {
		p, err := netip.ParsePrefix(d)
		if err != nil {
			return nil, errdefs.Invalid("network.denyOut: %q: %v", d, err)
		}
		cur = append(cur, p)
	}
	for _, a := range allow {
		ap, err := netip.ParsePrefix(a)
		if err != nil {
			return nil, errdefs.Invalid("network.allowOut: %q: %v", a, err)
		}
		next := cur[:0:0]
		for _, d := range cur {
			next = append(next, subtractPrefix(d, ap)...)
		}
		cur = next
		if len(cur) > 4*egress.MaxCIDRRules {
			return nil, errdefs.Invalid("network: allowOut's blocks carved out of denyOut's leave more than %d address rules; use fewer or wider blocks", egress.MaxCIDRRules)
		}
	}
	var out []string
	for _, p := range cur {
		if c := p.String(); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// subtractPrefix is d less a: d whole when they do not overlap, nothing
// when a holds d, else the halves along the way down from d to a that do
// not hold a.
func subtractPrefix(d, a netip.Prefix) []netip.Prefix {
	switch {
	case !d.Overlaps(a):
		return []netip.Prefix{d}
	case a.Bits() <= d.Bits():
		return nil // a holds d
	}
	var out []netip.Prefix
	for bits := d.Bits() + 1; bits <= a.Bits(); bits++ {
		inner := netip.PrefixFrom(a.Addr(), bits).Masked()
		// The sibling of inner at this length: the same bits but the last.
		b := inner.Addr().As4()
		i := (bits - 1) / 8
		b[i] ^= 1 << (7 - (bits-1)%8)
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(b), bits))
	}
	return out
}

// isAddress reports whether an entry is an IP address or a CIDR block.
func isAddress(e string) bool {
	addr, _, _ := strings.Cut(e, "/")
	_, err := netip.ParseAddr(strings.Trim(addr, "[]"))
	return err == nil
}

// policyFor turns what a create or an update asks for into a network
// policy; nil means mode none (loopback only). internet is
// allow_internet_access (nil when left out), def the daemon's default for
// that case.
//
// E2B's rules: internet access is on unless allow_internet_access is false
// or denyOut has ALL_TRAFFIC, and allowOut entries are allowed either way.
// Paddock's default (def none) is off. A sandbox gets egress when it may
// reach some host, or when it was given egress rules at all (so that its
// rules can be changed later; the mode is fixed at creation); an explicit
// allow_internet_access: false without allowOut is mode none.
func policyFor(internet *bool, s egressSpec, def string) (*api.NetworkPolicy, error) {
	on := def == config.E2BNetworkAll
	if internet != nil {
		on = *internet
	}
	if s.denyAll {
		on = false
	}
	p := &api.NetworkPolicy{Mode: api.NetworkEgress, DenyHosts: s.deny, AllowCIDRs: s.allowCIDR, DenyCIDRs: s.denyCIDR, Inject: s.inject}
	if on || s.allowAll {
		p.AllowHosts = append([]string{matchAll}, s.allow...)
	} else {
		p.AllowHosts = s.allow
	}
	switch {
	case len(p.AllowHosts) > 0, len(p.AllowCIDRs) > 0, s.denyAll:
		return p, nil
	case internet != nil && !*internet, !s.given:
		if len(s.inject) > 0 {
			return nil, errdefs.Invalid("network.rules need a network: this sandbox would have none (allow_internet_access is false and allowOut is empty)")
		}
		return nil, nil
	}
	return p, nil
}

// createNetwork is the network a create body asks for.
func createNetwork(b *newSandbox, def string) (*api.NetworkPolicy, error) {
	var s egressSpec
	if n := b.Network; n != nil {
		var err error
		if s, err = parseEgress(n.AllowOut, n.DenyOut, n.Rules, n.EgressProxy); err != nil {
			return nil, err
		}
	}
	return policyFor(b.AllowInternetAccess, s, def)
}

// updateNetwork is the network an update body asks for, nil for none.
func updateNetwork(b *networkUpdate, def string) (*api.NetworkPolicy, error) {
	s, err := parseEgress(b.AllowOut, b.DenyOut, b.Rules, b.EgressProxy)
	if err != nil {
		return nil, err
	}
	return policyFor(b.AllowInternetAccess, s, def)
}

// internetAccess reports whether a policy lets the sandbox reach any host
// name (the forbidden ranges aside).
func internetAccess(p *api.NetworkPolicy) bool {
	return p != nil && p.Mode == api.NetworkEgress && slices.Contains(p.AllowHosts, matchAll)
}

// egressInfo reports a sandbox's policy in E2B's terms: allowOut are the
// allow rules (the match-all one as ALL_TRAFFIC), denyOut the deny rules,
// headed by ALL_TRAFFIC whenever hosts outside allowOut are refused (always,
// unless the sandbox may reach any host).
func egressInfo(p *api.NetworkPolicy) (allowOut, denyOut []string, rules map[string][]networkRule) {
	allowOut, denyOut = []string{}, []string{}
	if p == nil || p.Mode != api.NetworkEgress {
		return allowOut, append(denyOut, allTraffic), nil
	}
	for _, h := range p.AllowHosts {
		if h == matchAll {
			h = allTraffic
		}
		allowOut = append(allowOut, h)
	}
	allowOut = append(allowOut, e2bAddrs(p.AllowCIDRs)...)
	if !internetAccess(p) {
		denyOut = append(denyOut, allTraffic)
	}
	denyOut = append(denyOut, p.DenyHosts...)
	denyOut = append(denyOut, e2bAddrs(p.DenyCIDRs)...)
	return allowOut, denyOut, rulesInfo(p.Inject)
}

// e2bAddrs writes address rules as E2B users give them: a /32 as the bare
// address.
func e2bAddrs(cidrs []string) []string {
	out := make([]string, 0, len(cidrs))
	for _, c := range cidrs {
		out = append(out, strings.TrimSuffix(c, "/32"))
	}
	return out
}

// transformRules turns E2B's per-host transforms into injection rules.
// Keys are exact names or a leading "*." wildcard (no bare "*"); header
// values may name secrets as ${e2b.secrets.NAME}. E2B applies only the
// most specific matching host's rules to a request, Paddock every
// matching rule per header, so hosts that could both match one name are
// refused rather than merged differently.
func transformRules(rules map[string][]networkRule) ([]api.Injection, error) {
	if len(rules) > maxRuleHosts {
		return nil, errdefs.Invalid("network.rules: %d hosts, at most %d", len(rules), maxRuleHosts)
	}
	hosts := make([]string, 0, len(rules))
	byHost := map[string][]networkRule{}
	for raw, rs := range rules {
		h, err := ruleHost(raw)
		if err != nil {
			return nil, err
		}
		if _, dup := byHost[h]; dup {
			return nil, errdefs.Invalid("network.rules: %q is given twice (host names are compared in lower case)", h)
		}
		byHost[h] = rs
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for i, a := range hosts {
		for _, b := range hosts[i+1:] {
			if covers(a, b) || covers(b, a) {
				return nil, errdefs.Invalid("network.rules: %q and %q can both match one host; Paddock would apply both hosts' headers where E2B applies only the more specific one's, so give the hosts rules that do not overlap", a, b)
			}
		}
	}
	var out []api.Injection
	for _, h := range hosts {
		seen := map[string]bool{}
		var rule []api.Injection // the host's headers, in order of name
		for _, r := range byHost[h] {
			if r.Transform == nil {
				continue
			}
			if len(out)+len(rule)+len(r.Transform.Headers) > egress.MaxInjections {
				return nil, errdefs.Invalid("network.rules: more than %d headers in all", egress.MaxInjections)
			}
			for k, raw := range r.Transform.Headers {
				name, err := egress.NormalizeHeaderName(k)
				if err != nil {
					return nil, fmt.Errorf("network.rules[%q]: %w", h, err)
				}
				if seen[name] {
					return nil, errdefs.Invalid("network.rules[%q]: header %s is set twice", h, name)
				}
				seen[name] = true
				v, err := headerTemplate(raw)
				if err != nil {
					return nil, fmt.Errorf("network.rules[%q] header %s: %w", h, name, err)
				}
				rule = append(rule, api.Injection{Host: h, Header: name, Value: v})
			}
		}
		slices.SortFunc(rule, func(a, b api.Injection) int { return strings.Compare(a.Header, b.Header) })
		out = append(out, rule...)
	}
	return out, nil
}

// ruleHost normalises a rules key: a host name or "*." and a host name.
func ruleHost(raw string) (string, error) {
	h, err := egress.NormalizeGlob(raw)
	if err != nil {
		return "", fmt.Errorf("network.rules: %w", err)
	}
	if strings.Contains(strings.TrimPrefix(h, "*."), "*") {
		return "", errdefs.Invalid("network.rules: %q: a rule's host is a name or a leading \"*.\" wildcard (a bare \"*\" is not allowed)", truncate(raw))
	}
	return h, nil
}

// covers reports whether rule host a matches some name rule host b
// matches too (b's names are a subset of a's, or equal).
func covers(a, b string) bool {
	suffix, ok := strings.CutPrefix(a, "*.")
	if !ok {
		return a == b
	}
	return strings.HasSuffix(strings.TrimPrefix(b, "*."), "."+suffix)
}

// E2B's placeholders in header values, resolved at egress.
const (
	e2bPlaceholder = "${e2b."
	e2bSecretRef   = "${e2b.secrets."
	paddockRef     = "{{secret:"
)

// headerTemplate turns an E2B header value into a Paddock template:
// ${e2b.secrets.NAME} becomes {{secret:name}} (E2B lower-cases secret
// names), the rest stays literal. Workload identity tokens
// (${e2b.identity.tokens.NAME}) are not supported, and a literal
// "{{secret:" is refused because Paddock would read it as a reference.
func headerTemplate(v string) (string, error) {
	if strings.Contains(v, paddockRef) {
		return "", errdefs.Invalid("the value contains %q, which Paddock reads as a secret reference; name secrets as ${e2b.secrets.NAME}", paddockRef)
	}
	var b strings.Builder
	rest := v
	for {
		i := strings.Index(rest, e2bPlaceholder)
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		if !strings.HasPrefix(rest, e2bSecretRef) {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				end = len(rest) - 1
			}
			return "", errdefs.Invalid("placeholder %q is not supported: only ${e2b.secrets.NAME} is (no workload identity tokens)", truncate(rest[:end+1]))
		}
		rest = rest[len(e2bSecretRef):]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", errdefs.Invalid("placeholder %q is not closed by '}'", truncate(e2bSecretRef+rest))
		}
		name := strings.ToLower(rest[:end])
		if err := egress.ValidSecretName(name); err != nil {
			return "", err
		}
		b.WriteString(paddockRef + name + "}}")
		rest = rest[end+1:]
	}
	if _, err := egress.ParseTemplate(b.String()); err != nil {
		return "", err
	}
	return b.String(), nil
}

// rulesInfo reports injection rules in E2B's shape, secrets named as
// E2B's placeholders (never their values, which the daemon alone holds).
func rulesInfo(in []api.Injection) map[string][]networkRule {
	if len(in) == 0 {
		return nil
	}
	out := map[string][]networkRule{}
	for _, r := range in {
		if len(out[r.Host]) == 0 {
			out[r.Host] = []networkRule{{Transform: &networkTransform{Headers: map[string]string{}}}}
		}
		out[r.Host][0].Transform.Headers[r.Header] = e2bValue(r.Value)
	}
	return out
}

func e2bValue(tmpl string) string {
	t, err := egress.ParseTemplate(tmpl)
	if err != nil {
		return tmpl
	}
	var b strings.Builder
	for _, p := range t {
		if p.Secret != "" {
			b.WriteString(e2bSecretRef + p.Secret + "}")
		} else {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// checkPorts checks maskRequestHost and httpsPorts, which change how the
// data plane reaches the sandbox's ports (proxy.go), and returns them as
// the labels that keep them.
func checkPorts(n *networkConfig) (mask, https string, err error) {
	if n == nil {
		return "", "", nil
	}
	if n.MaskRequestHost != nil && *n.MaskRequestHost != "" {
		mask = *n.MaskRequestHost
		if err := validMask(mask); err != nil {
			return "", "", err
		}
	}
	if len(n.HTTPSPorts) > maxHTTPSPorts {
		return "", "", errdefs.Invalid("network.httpsPorts: %d ports, at most %d", len(n.HTTPSPorts), maxHTTPSPorts)
	}
	var ports []string
	seen := map[int]bool{}
	for _, p := range n.HTTPSPorts {
		switch {
		case p < 1 || p > 65535:
			return "", "", errdefs.Invalid("network.httpsPorts: %d is not a port", p)
		case p == EnvdPort, p == CodeInterpreterPort:
			return "", "", errdefs.Invalid("network.httpsPorts: port %d is served by Paddock itself and cannot be listed", p)
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, fmt.Sprint(p))
		}
	}
	return mask, strings.Join(ports, ","), nil
}

// validMask accepts a host name or address, optionally with a port, in
// which ${PORT} may stand for the sandbox port addressed.
func validMask(m string) error {
	bad := errdefs.Invalid("network.maskRequestHost %q: want a host with an optional port, such as localhost:${PORT}", truncate(m))
	if len(m) > maxMaskHostLen {
		return bad
	}
	probe := strings.ReplaceAll(m, "${PORT}", "1")
	for i := 0; i < len(probe); i++ {
		c := probe[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-_:[]", c) >= 0) {
			return bad
		}
	}
	if probe == "" || strings.HasPrefix(probe, ":") {
		return bad
	}
	return nil
}

// parseHTTPSPorts reads the httpsPorts label.
func parseHTTPSPorts(label string) []int {
	var out []int
	for _, s := range strings.Split(label, ",") {
		if p, err := parsePort(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}
