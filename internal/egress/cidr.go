package egress

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Address rules (CIDR rules) let a sandbox reach IPv4 addresses directly,
// any port and protocol, past the proxy: the host forwards its packets to
// them. Deny rules win over allow rules, and some ranges are never reached
// whatever the rules say (DirectRoutes).
const (
	// MaxCIDRRules bounds a sandbox's address rules, allow and deny
	// together.
	MaxCIDRRules = 64
	// MaxDirectPrefixes bounds the prefixes the rules come to once deny
	// rules and forbidden ranges are cut out of them (each is a firewall
	// element or rule).
	MaxDirectPrefixes = 512
	maxCIDRLen        = 64
)

// neverDirect are ranges no address rule reaches, whatever
// PADDOCK_EGRESS_PERMIT says: "this network", loopback, link-local (the
// cloud's metadata service), multicast, reserved and broadcast.
var neverDirect = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// NormalizeCIDR checks an address rule: an IPv4 address ("1.1.1.1", the
// same as /32) or prefix ("10.1.0.0/16"; host bits are cleared). IPv6 is
// refused: a sandbox has no IPv6.
func NormalizeCIDR(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxCIDRLen {
		return netip.Prefix{}, fmt.Errorf("address rule %q: empty or longer than %d bytes: %w", trunc(s), maxCIDRLen, errdefs.ErrInvalidArgument)
	}
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("address rule %q: not an IPv4 address or CIDR block: %w", s, errdefs.ErrInvalidArgument)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("address rule %q: not an IPv4 address or CIDR block: %w", s, errdefs.ErrInvalidArgument)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("address rule %q: IPv6 is not supported, a sandbox has no IPv6 (use an IPv4 address or block): %w", s, errdefs.ErrInvalidArgument)
	}
	return p.Masked(), nil
}

// normalizeCIDRs checks a list of address rules and drops repeats, keeping
// the order.
func normalizeCIDRs(in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		p, err := NormalizeCIDR(s)
		if err != nil {
			return nil, err
		}
		if c := p.String(); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// span is an inclusive range of IPv4 addresses as numbers; uint64 so that
// the end of the address space needs no special case.
type span struct{ lo, hi uint64 }

func spanOf(p netip.Prefix) span {
	a := p.Masked().Addr().As4()
	lo := uint64(a[0])<<24 | uint64(a[1])<<16 | uint64(a[2])<<8 | uint64(a[3])
	return span{lo, lo + 1<<(32-p.Bits()) - 1}
}

// spanSet is a sorted list of disjoint, non-adjacent spans.
type spanSet []span

func spansOf(ps []netip.Prefix) spanSet {
	var s spanSet
	for _, p := range ps {
		if p.IsValid() && p.Addr().Is4() {
			s = append(s, spanOf(p))
		}
	}
	return s.merged()
}

func (s spanSet) merged() spanSet {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var out spanSet
	for _, x := range s {
		if n := len(out); n > 0 && x.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// minus is s without every address of t (both merged).
func (s spanSet) minus(t spanSet) spanSet {
	var out spanSet
	for _, x := range s {
		for _, y := range t {
			if y.hi < x.lo || y.lo > x.hi {
				continue
			}
			if y.lo > x.lo {
				out = append(out, span{x.lo, y.lo - 1})
			}
			if y.hi >= x.hi {
				x.lo = x.hi + 1 // nothing left of x
				break
			}
			x.lo = y.hi + 1
		}
		if x.lo <= x.hi {
			out = append(out, x)
		}
	}
	return out
}

// prefixes is the shortest list of prefixes covering exactly s.
func (s spanSet) prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		for lo := x.lo; lo <= x.hi; {
			// The largest block aligned at lo that fits in what is left.
			size := uint64(1) << 32
			if lo != 0 {
				size = uint64(1) << bits.TrailingZeros64(lo)
			}
			for size > x.hi-lo+1 {
				size >>= 1
			}
			a := netip.AddrFrom4([4]byte{byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)})
			out = append(out, netip.PrefixFrom(a, 32-bits.TrailingZeros64(size)))
			lo += size
		}
	}
	return out
}

// DirectRoutes is what a sandbox's address rules let it reach directly:
// the allow prefixes, less the deny prefixes (deny wins), less every
// range the proxy refuses (Forbidden) that permitted does not exempt,
// less the ranges no permit exempts (loopback, link-local, multicast,
// reserved, "this network") and less own (the daemon's range: every
// gateway and sandbox). The result is disjoint prefixes in address order.
func DirectRoutes(allow, deny, permitted, own []netip.Prefix) []netip.Prefix {
	if len(allow) == 0 {
		return nil
	}
	closed := spansOf(forbidden).minus(spansOf(permitted))
	closed = append(closed, spansOf(neverDirect)...)
	closed = append(closed, spansOf(own)...)
	closed = append(closed, spansOf(deny)...)
	return spansOf(allow).minus(closed.merged()).prefixes()
}

// parsePrefixes parses normalised address rules; the caller checked them.
func parsePrefixes(in []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in))
	for _, s := range in {
		if p, err := NormalizeCIDR(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// DirectRoutes is p's address rules as the destinations a sandbox of s
// reaches directly.
func (s *Server) DirectRoutes(p Policy) []netip.Prefix {
	return DirectRoutes(parsePrefixes(p.AllowCIDR), parsePrefixes(p.DenyCIDR), s.opts.Permitted, s.opts.OwnRanges)
}

// CheckDirect refuses address rules that cannot work here: an allow rule
// that lies wholly in ranges no sandbox reaches directly (so the caller
// learns it at once rather than from a silent drop), and rules that come
// to more than MaxDirectPrefixes prefixes.
func (s *Server) CheckDirect(p Policy) error {
	for _, a := range parsePrefixes(p.AllowCIDR) {
		if len(DirectRoutes([]netip.Prefix{a}, nil, s.opts.Permitted, s.opts.OwnRanges)) == 0 {
			return fmt.Errorf("address rule %s: never reachable from a sandbox: it lies in loopback, link-local (metadata), multicast or reserved addresses, the daemon's own range, or private ranges the operator has not permitted (PADDOCK_EGRESS_PERMIT): %w", a, errdefs.ErrInvalidArgument)
		}
	}
	if n := len(s.DirectRoutes(p)); n > MaxDirectPrefixes {
		return fmt.Errorf("address rules come to %d prefixes once deny rules and forbidden ranges are cut out: at most %d; use fewer or wider rules: %w", n, MaxDirectPrefixes, errdefs.ErrInvalidArgument)
	}
	return nil
}

// decideAddr applies address rules to an IP literal the proxy is asked
// for: allowed if a direct route covers it (any port), else refused by the
// deny rule covering it or as a direct-ip request.
func (p Policy) decideAddr(ip netip.Addr) Decision {
	ip = ip.Unmap()
	for _, r := range p.Direct {
		if r.Contains(ip) {
			return Decision{Allowed: true, Rule: "allow-cidr:" + r.String()}
		}
	}
	for _, d := range parsePrefixes(p.DenyCIDR) {
		if d.Contains(ip) {
			return Decision{Rule: "deny-cidr:" + d.String()}
		}
	}
	return Decision{Rule: "direct-ip"}
}
