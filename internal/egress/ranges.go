package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// forbidden are destinations the proxy never connects to, whatever a name
// resolves to: a name allowed by the rules must not become a way into the
// host, the cloud's metadata service or a private network (DNS rebinding).
// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are judged by the IPv4
// address they carry (Forbidden unmaps first); the other forms that carry
// or reach an IPv4 address (IPv4-compatible, 6to4, Teredo, NAT64) are
// refused whole, since a relay or translator would take them anywhere.
var forbidden = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // carrier-grade NAT (Paddock's default range is in it)
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.88.99.0/24",  // 6to4 relay anycast (deprecated)
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast

		"::/128",          // unspecified
		"::1/128",         // loopback
		"::/96",           // IPv4-compatible (deprecated)
		"::ffff:0:0:0/96", // IPv4-translated
		"64:ff9b::/96",    // NAT64
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard
		"2001::/23",       // IETF protocol assignments: Teredo (2001::/32), benchmarking, ORCHID
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4
		"3fff::/20",       // documentation
		"5f00::/16",       // segment routing SIDs
		"fc00::/7",        // unique local
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
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

// forbiddenDst reports whether the proxy must not connect to ip (nor the
// resolver hand it to a sandbox): the daemon's own ranges (every sandbox's
// gateway and address, wherever the operator put the range) and the host's
// own addresses are refused whatever Permitted says; the rest is Forbidden.
func (s *Server) forbiddenDst(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range s.opts.OwnRanges {
		if p.Contains(ip) {
			return true
		}
	}
	if s.hosts.has(ip) {
		return true
	}
	return Forbidden(ip, s.opts.Permitted)
}

// hostAddrTTL is how long a listing of the host's addresses is used.
const hostAddrTTL = 3 * time.Second

// hostAddrs caches the host's own interface addresses: an allowed name
// that resolves to one of them must not reach the host's ports.
type hostAddrs struct {
	list func() ([]netip.Addr, error)
	ttl  time.Duration
	// onError reports a failed listing; until one succeeds every address
	// counts as the host's (fail closed).
	onError func(error)

	mu  sync.Mutex
	at  time.Time
	set map[netip.Addr]struct{}
}

func (h *hostAddrs) has(ip netip.Addr) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.set == nil || time.Since(h.at) >= h.ttl {
		addrs, err := h.list()
		if err != nil {
			if h.onError != nil {
				h.onError(err)
			}
			if h.set == nil {
				return true
			}
		} else {
			h.set = make(map[netip.Addr]struct{}, len(addrs))
			for _, a := range addrs {
				h.set[a.Unmap().WithZone("")] = struct{}{}
			}
		}
		h.at = time.Now()
	}
	_, ok := h.set[ip.WithZone("")]
	return ok
}

// interfaceAddrs lists every address on the host's interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}
