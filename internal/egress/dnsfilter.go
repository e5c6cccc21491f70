package egress

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// An upstream's answer is outside input too: it can carry records for
// names nobody asked about (to be cached by the sandbox's resolver under
// those names), alias an allowed name to a denied one, or point an allowed
// name at an address the proxy refuses. Only what belongs to the question
// passes.

// maxChain bounds the names an answer's aliases may add to the question's
// (a DNAME whose target lies under its owner would add names forever).
const maxChain = 16

// answerFilter says what filterAnswer refuses: deny names the deny rule an
// alias target matches ("" if none), forbidden says whether an address is
// a refused destination. Either may be nil.
type answerFilter struct {
	deny      func(name string) string
	forbidden func(netip.Addr) bool
}

// filtered is filterAnswer's result.
type filtered struct {
	answer []dns.RR
	// deniedName and denyRule are set when an alias target is denied: the
	// whole answer is refused.
	deniedName, denyRule string
	// droppedAddrs counts A and AAAA records of forbidden addresses that
	// were removed; keptAddrs those that remain.
	droppedAddrs, keptAddrs int
}

func canonical(name string) string { return strings.ToLower(dns.Fqdn(name)) }

// filterAnswer keeps the records of an answer to qname that belong to it:
// those owned by qname or by a name on its alias chain (CNAME targets, and
// the names a DNAME above a chain name rewrites it to), with the DNAMEs
// that apply. Alias targets are checked against the deny rules, A and AAAA
// records against the forbidden destinations.
func filterAnswer(qname string, rrs []dns.RR, f answerFilter) filtered {
	chain := map[string]bool{canonical(qname): true}
	dnames := map[dns.RR]bool{} // the DNAMEs that apply to a chain name
	var targets []string        // alias targets, in the order found
	add := func(n string) bool {
		if chain[n] || len(chain) >= maxChain || !dnsNameOK(n) {
			return false
		}
		chain[n] = true
		targets = append(targets, n)
		return true
	}
	for changed := true; changed; {
		changed = false
		for _, rr := range rrs {
			switch v := rr.(type) {
			case *dns.CNAME:
				if chain[canonical(v.Hdr.Name)] && add(canonical(v.Target)) {
					changed = true
				}
			case *dns.DNAME:
				owner, target := canonical(v.Hdr.Name), canonical(v.Target)
				for n := range chain {
					if n == owner || !strings.HasSuffix(n, "."+owner) {
						continue // a DNAME rewrites names below its owner only
					}
					if !dnames[rr] {
						dnames[rr] = true
						targets = append(targets, target)
					}
					if add(strings.TrimSuffix(n, owner) + target) {
						changed = true
					}
				}
			}
		}
	}
	var out filtered
	if f.deny != nil {
		for _, n := range targets {
			if rule := f.deny(n); rule != "" {
				out.deniedName, out.denyRule = strings.TrimSuffix(n, "."), rule
				return out
			}
		}
	}
	for _, rr := range rrs {
		if _, ok := rr.(*dns.DNAME); ok {
			if dnames[rr] {
				out.answer = append(out.answer, rr)
			}
			continue
		}
		if !chain[canonical(rr.Header().Name)] {
			continue
		}
		var a netip.Addr
		switch v := rr.(type) {
		case *dns.A:
			a, _ = netip.AddrFromSlice(v.A)
		case *dns.AAAA:
			a, _ = netip.AddrFromSlice(v.AAAA)
		default:
			out.answer = append(out.answer, rr)
			continue
		}
		if f.forbidden != nil && f.forbidden(a) {
			out.droppedAddrs++
			continue
		}
		out.keptAddrs++
		out.answer = append(out.answer, rr)
	}
	return out
}

// dnsNameOK reports whether n is a well-formed (fully qualified) name.
func dnsNameOK(n string) bool {
	_, ok := dns.IsDomainName(n)
	return ok && len(n) <= 255
}

// denyRuleOf returns the deny rule of p that name matches, or "".
func denyRuleOf(p Policy) func(string) string {
	return func(name string) string {
		if d := p.Decide(name); strings.HasPrefix(d.Rule, "deny:") {
			return d.Rule
		}
		return ""
	}
}

// soaOnly keeps the SOA records of an authority section (what a negative
// answer needs to be cached); referrals and other names are dropped.
func soaOnly(rrs []dns.RR) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if _, ok := rr.(*dns.SOA); ok {
			out = append(out, rr)
		}
	}
	return out
}
