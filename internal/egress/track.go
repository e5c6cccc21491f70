package egress

import (
	"net"
	"net/http"
)

// A connection is admitted for one host and port; while it is open the
// sandbox's rules can change (a rule update, a command's grant ending), and
// what the new rules refuse must not go on through a connection opened
// under the old ones. Each box keeps its open connections with what they
// were admitted for, and every rule change decides them again.

// admission is what a connection (or the pair of a tunnel) was let
// through for.
type admission struct {
	host string
	port int
}

// track registers a connection to be closed when the sandbox detaches; it
// returns false (and closes c) if the sandbox is gone already.
func (b *box) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.Close()
		return false
	}
	if _, ok := b.conns[c]; !ok {
		b.conns[c] = nil
	}
	return true
}

func (b *box) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
}

// admit records that the tracked connections cs now carry traffic for
// host:port, and decides the destination under the current rules: a rule
// change that came before the record is seen here, one that comes after
// sees the record (recheck). It returns the refusing rule, or "" and a
// release to call when the connections stop carrying that traffic (a
// kept-alive connection between requests).
func (s *Server) admit(b *box, host string, port int, cs ...net.Conn) (release func(), rule string) {
	a := &admission{host: host, port: port}
	b.mu.Lock()
	for _, c := range cs {
		if _, ok := b.conns[c]; ok {
			b.conns[c] = a
		}
	}
	b.mu.Unlock()
	release = func() {
		b.mu.Lock()
		for _, c := range cs {
			if cur, ok := b.conns[c]; ok && cur == a {
				b.conns[c] = nil
			}
		}
		b.mu.Unlock()
	}
	if rule := s.check(b, host, port); rule != "" {
		release()
		return func() {}, rule
	}
	return release, ""
}

// recheck decides every admitted connection again under the current rules
// and closes those they refuse, recording each as refused with via
// "rules-changed".
func (s *Server) recheck(b *box) {
	p := b.current()
	type closed struct {
		a    *admission
		rule string
	}
	var refused []closed
	b.mu.Lock()
	decided := map[*admission]string{}
	for c, a := range b.conns {
		if a == nil {
			continue
		}
		rule, ok := decided[a]
		if !ok {
			rule = checkPolicy(p, a.host, a.port)
			decided[a] = rule
			if rule != "" {
				refused = append(refused, closed{a, rule})
			}
		}
		if rule != "" {
			c.Close()
		}
	}
	b.mu.Unlock()
	for _, r := range refused {
		s.refuse(b, r.a.host, r.a.port, r.rule, "rules-changed")
	}
}

type connKey struct{}

// connOf is the sandbox's connection a proxy request arrived on.
func connOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}
