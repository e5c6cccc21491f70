package egress

import "net/netip"

// forbidden are destinations the proxy never connects to, whatever a name
// resolves to: a name allowed by the rules must not become a way into the
// host, the cloud's metadata service or a private network (DNS rebinding).
var forbidden = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "100::/64", "2001:db8::/32",
		"fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Forbidden reports whether ip is in a range the proxy refuses, unless it
// lies in one of the permitted prefixes (operators and tests that run
// upstreams on private addresses opt in explicitly).
func Forbidden(ip netip.Addr, permitted []netip.Prefix) bool {
	ip = ip.Unmap()
	for _, p := range permitted {
		if p.Contains(ip) {
			return false
		}
	}
	if !ip.IsValid() {
		return true
	}
	for _, p := range forbidden {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
