package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// A sandbox's proxy, transparent listener and resolver listen on its
// gateway address, which anything that can route to that address can
// reach: the host's own users and containers, and on some networks a
// neighbour routing Paddock's range. Only the sandbox itself may use them
// (they hold its rules, its injected credentials and its ledger), so every
// listener serves one source address, the sandbox's, and drops the rest
// without an answer. The firewall enforces the same; this check does not
// depend on it.

// fromPeer reports whether a connection or packet came from peer.
func fromPeer(a net.Addr, peer netip.Addr) bool {
	var ap netip.AddrPort
	switch v := a.(type) {
	case *net.TCPAddr:
		ap = v.AddrPort()
	case *net.UDPAddr:
		ap = v.AddrPort()
	default:
		return false
	}
	return peer.IsValid() && ap.Addr().Unmap() == peer
}

// peerListener accepts only connections from peer; others are closed
// unanswered and reported to drop.
type peerListener struct {
	net.Listener
	peer netip.Addr
	drop func(from net.Addr)
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if fromPeer(c.RemoteAddr(), l.peer) {
			return c, nil
		}
		l.drop(c.RemoteAddr())
		c.Close()
	}
}

// peerReader is a DNS server reader that discards UDP queries from any
// address but peer before they are parsed or answered.
type peerReader struct {
	dns.Reader
	peer netip.Addr
	drop func(from net.Addr)
}

func (r peerReader) ReadUDP(conn *net.UDPConn, timeout time.Duration) ([]byte, *dns.SessionUDP, error) {
	for {
		m, s, err := r.Reader.ReadUDP(conn, timeout)
		if err != nil || fromPeer(s.RemoteAddr(), r.peer) {
			return m, s, err
		}
		r.drop(s.RemoteAddr())
	}
}

// logLimit lets one log line per key through per window, so that a flood
// of refusals or dropped probes cannot flood the daemon's log.
type logLimit struct {
	mu     sync.Mutex
	window time.Duration
	last   map[string]time.Time
}

const maxLogKeys = 4096

func newLogLimit(window time.Duration) *logLimit {
	return &logLimit{window: window, last: map[string]time.Time{}}
}

func (l *logLimit) allow(key string) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.window {
		return false
	}
	if len(l.last) >= maxLogKeys {
		for k, t := range l.last {
			if now.Sub(t) >= l.window {
				delete(l.last, k)
			}
		}
		if len(l.last) >= maxLogKeys {
			return false
		}
	}
	l.last[key] = now
	return true
}
