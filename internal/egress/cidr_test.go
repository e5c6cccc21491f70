package egress

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestNormalizeCIDR(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "1.1.1.1", want: "1.1.1.1/32"},
		{in: " 1.1.1.1 ", want: "1.1.1.1/32"},
		{in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{in: "10.1.2.3/8", want: "10.0.0.0/8"},
		{in: "198.19.3.6/30", want: "198.19.3.4/30"},
		{in: "", err: "empty"},
		{in: "1.1.1", err: "not an IPv4"},
		{in: "01.1.1.1", err: "not an IPv4"},
		{in: "1.1.1.1/33", err: "not an IPv4"},
		{in: "1.1.1.1/-1", err: "not an IPv4"},
		{in: "example.com", err: "not an IPv4"},
		{in: "1.1.1.1%eth0", err: "not an IPv4"},
		{in: "::1", err: "IPv6"},
		{in: "2001:db8::/32", err: "IPv6"},
		{in: "::ffff:1.1.1.1", err: "IPv6"},
		{in: "::ffff:1.1.1.0/120", err: "IPv6"},
		{in: strings.Repeat("1", 65), err: "longer"},
	} {
		p, err := NormalizeCIDR(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("NormalizeCIDR(%q) = %v, %v; want an invalid-argument error with %q", tc.in, p, err, tc.err)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("NormalizeCIDR(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
		}
	}
}

func TestNormalizePolicyCIDRs(t *testing.T) {
	p, err := NormalizePolicy(Policy{AllowCIDR: []string{"1.1.1.1", "1.1.1.1/32", "10.9.9.9/8"}, DenyCIDR: []string{"10.1.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.AllowCIDR, []string{"1.1.1.1/32", "10.0.0.0/8"}) || !slices.Equal(p.DenyCIDR, []string{"10.1.0.0/16"}) {
		t.Fatalf("normalised %v %v", p.AllowCIDR, p.DenyCIDR)
	}
	many := make([]string, MaxCIDRRules+1)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{8, 8, byte(i), 1}).String()
	}
	if _, err := NormalizePolicy(Policy{AllowCIDR: many}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("%d rules: %v", len(many), err)
	}
	if _, err := NormalizePolicy(Policy{DenyCIDR: []string{"fe80::/10"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("IPv6 deny rule: %v", err)
	}
}

func pfx(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestDirectRoutes(t *testing.T) {
	own := pfx("100.96.0.0/11")
	in := func(routes []netip.Prefix, a string) bool {
		ip := netip.MustParseAddr(a)
		for _, r := range routes {
			if r.Contains(ip) {
				return true
			}
		}
		return false
	}
	all := DirectRoutes(pfx("0.0.0.0/0"), nil, nil, own)
	for _, a := range []string{"1.1.1.1", "8.8.8.8", "100.63.255.255", "223.255.255.255", "172.32.0.1"} {
		if !in(all, a) {
			t.Errorf("0.0.0.0/0 leaves out public %s", a)
		}
	}
	for _, a := range []string{"169.254.169.254", "127.0.0.1", "10.0.0.1", "192.168.1.1", "172.16.0.1", "100.96.0.1", "100.96.0.2", "100.64.0.1", "224.0.0.1", "255.255.255.255", "0.0.0.0", "198.19.0.2"} {
		if in(all, a) {
			t.Errorf("0.0.0.0/0 reaches forbidden %s", a)
		}
	}
	if len(all) > 128 {
		t.Errorf("0.0.0.0/0 comes to %d prefixes", len(all))
	}

	// Permitted opens private ranges, never loopback, link-local, the
	// daemon's range or what a deny rule covers.
	permit := pfx("198.19.3.0/24", "169.254.0.0/16", "100.96.0.0/11", "127.0.0.0/8")
	got := DirectRoutes(pfx("0.0.0.0/0"), pfx("198.19.3.8/30"), permit, own)
	for _, a := range []string{"198.19.3.2", "198.19.3.255"} {
		if !in(got, a) {
			t.Errorf("permitted %s left out", a)
		}
	}
	for _, a := range []string{"198.19.3.9", "169.254.169.254", "100.96.0.1", "127.0.0.1", "198.19.4.1"} {
		if in(got, a) {
			t.Errorf("%s reachable: %v", a, got)
		}
	}

	// Deny wins over allow.
	got = DirectRoutes(pfx("8.8.0.0/16"), pfx("8.8.8.0/24", "9.0.0.0/8"), nil, own)
	want := pfx("8.8.0.0/21", "8.8.9.0/24", "8.8.10.0/23", "8.8.12.0/22", "8.8.16.0/20", "8.8.32.0/19", "8.8.64.0/18", "8.8.128.0/17")
	if !slices.Equal(got, want) {
		t.Errorf("8.8.0.0/16 less 8.8.8.0/24 = %v, want %v", got, want)
	}
	if got := DirectRoutes(pfx("8.8.8.8/32"), pfx("8.0.0.0/8"), nil, own); len(got) != 0 {
		t.Errorf("a deny rule covering the allow rule leaves %v", got)
	}
	if got := DirectRoutes(nil, nil, nil, own); got != nil {
		t.Errorf("no allow rules: %v", got)
	}
}

// TestDirectRoutesMatchesReference compares the prefix arithmetic with a
// per-address reference on random small rule sets in one /16.
func TestDirectRoutesMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func() netip.Prefix {
		bits := 16 + r.IntN(17)
		a := netip.AddrFrom4([4]byte{8, 8, byte(r.IntN(256)), byte(r.IntN(256))})
		return netip.PrefixFrom(a, bits).Masked()
	}
	for range 200 {
		var allow, deny []netip.Prefix
		for range 1 + r.IntN(4) {
			allow = append(allow, rnd())
		}
		for range r.IntN(4) {
			deny = append(deny, rnd())
		}
		got := DirectRoutes(allow, deny, nil, nil)
		checkDirect(t, got, allow, deny)
	}
}

// checkDirect verifies routes against allow and deny address by address
// in 8.8.0.0/16, and that the routes are disjoint and ordered.
func checkDirect(t *testing.T, routes, allow, deny []netip.Prefix) {
	t.Helper()
	for i := 1; i < len(routes); i++ {
		if spanOf(routes[i-1]).hi >= spanOf(routes[i]).lo {
			t.Fatalf("routes %v overlap or are out of order", routes)
		}
	}
	contains := func(ps []netip.Prefix, a netip.Addr) bool {
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	for n := range 1 << 16 {
		a := netip.AddrFrom4([4]byte{8, 8, byte(n >> 8), byte(n)})
		want := contains(allow, a) && !contains(deny, a)
		if got := contains(routes, a); got != want {
			t.Fatalf("allow %v deny %v: %s reachable %v, want %v (routes %v)", allow, deny, a, got, want, routes)
		}
	}
}

func TestDecideAddr(t *testing.T) {
	s := New(Options{OwnRanges: pfx("100.96.0.0/11")})
	p, err := NormalizePolicy(Policy{Allow: []string{"*"}, AllowCIDR: []string{"8.8.0.0/16"}, DenyCIDR: []string{"8.8.4.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	p.Direct = s.DirectRoutes(p)
	for host, want := range map[string]string{
		"8.8.8.8":         "allow-cidr:8.8.8.0/21",
		"[8.8.8.8]":       "allow-cidr:8.8.8.0/21",
		"8.8.4.4":         "deny-cidr:8.8.4.0/24",
		"1.1.1.1":         "direct-ip",
		"::ffff:8.8.8.8":  "allow-cidr:8.8.8.0/21",
		"2001:4860::8888": "direct-ip",
		"example.com":     "allow:*",
	} {
		if d := p.Decide(host); d.Rule != want {
			t.Errorf("Decide(%s) = %+v, want rule %s", host, d, want)
		}
	}
	// Any port for an allowed address, the ports rule for names.
	if rule := checkPolicy(p, "8.8.8.8", 5432); rule != "" {
		t.Errorf("8.8.8.8:5432 refused by %s", rule)
	}
	if rule := checkPolicy(p, "example.com", 5432); rule != "port:5432" {
		t.Errorf("example.com:5432 refused by %q, want port:5432", rule)
	}
}

func TestCheckDirect(t *testing.T) {
	s := New(Options{OwnRanges: pfx("100.96.0.0/11"), Permitted: pfx("198.19.0.0/24")})
	for _, ok := range [][]string{{"1.1.1.1"}, {"0.0.0.0/0"}, {"198.19.0.2"}, {"10.0.0.0/7"}} {
		if err := s.CheckDirect(Policy{AllowCIDR: ok}); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"169.254.169.254/32"}, {"127.0.0.1/32"}, {"10.0.0.0/8"}, {"100.96.0.2/32"}, {"224.0.0.0/4"}} {
		if err := s.CheckDirect(Policy{AllowCIDR: bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%v: %v, want an invalid-argument error", bad, err)
		}
	}
	// Deny rules that shred a wide allow rule are bounded.
	var deny []string
	for i := range MaxCIDRRules - 1 {
		deny = append(deny, netip.AddrFrom4([4]byte{byte(1 + 3*i), 1, 2, 3}).String())
	}
	if err := s.CheckDirect(Policy{AllowCIDR: []string{"0.0.0.0/0"}, DenyCIDR: deny}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("%d deny addresses in 0.0.0.0/0: %v", len(deny), err)
	}
}

// FuzzNormalizeCIDR: whatever the input, a rule that parses is a masked
// IPv4 prefix that parses again to itself, and the routes of any two
// rules hold exactly the addresses allowed and not denied.
func FuzzNormalizeCIDR(f *testing.F) {
	for _, s := range []string{"1.1.1.1", "0.0.0.0/0", "8.8.4.0/22", "::1", "1.2.3.4/33", "8.8.8.8/31"} {
		f.Add(s, "8.8.8.8/30")
	}
	f.Fuzz(func(t *testing.T, a, d string) {
		p, err := NormalizeCIDR(a)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("%q: %v is not an invalid-argument error", a, err)
			}
			return
		}
		if !p.Addr().Is4() || p != p.Masked() {
			t.Fatalf("%q gives %v", a, p)
		}
		if q, err := NormalizeCIDR(p.String()); err != nil || q != p {
			t.Fatalf("%q gives %v, which gives %v, %v", a, p, q, err)
		}
		q, err := NormalizeCIDR(d)
		if err != nil {
			return
		}
		// Checked address by address only within 8.8.0.0/16, which no
		// forbidden range touches.
		in16 := func(x netip.Prefix) netip.Prefix {
			if x.Bits() < 16 {
				return netip.MustParsePrefix("8.8.0.0/16")
			}
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{8, 8, x.Addr().As4()[2], x.Addr().As4()[3]}), x.Bits()).Masked()
		}
		allow, deny := []netip.Prefix{in16(p)}, []netip.Prefix{in16(q)}
		checkDirect(t, DirectRoutes(allow, deny, nil, nil), allow, deny)
	})
}
