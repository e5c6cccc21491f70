package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Resolver is how the daemon itself resolves names for the proxy and what
// the sandboxes' DNS forwards to. Static entries answer first (tests and
// operators pin names to addresses); the rest go to Upstream, or to the
// host's first nameserver when Upstream is empty.
type Resolver struct {
	Static   map[string][]netip.Addr
	Upstream string // host:port

	// Forwarded counts queries sent upstream (observability and tests).
	Forwarded atomic.Int64

	// exchangeFn, when set, replaces the exchange with the upstream
	// (tests and fuzzing without a network).
	exchangeFn func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

func (r *Resolver) upstream() (string, error) {
	if r.Upstream != "" {
		return r.Upstream, nil
	}
	cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil || len(cc.Servers) == 0 {
		return "", errors.New("no upstream nameserver configured")
	}
	return net.JoinHostPort(cc.Servers[0], cc.Port), nil
}

// Lookup returns a host's addresses.
func (r *Resolver) Lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	h, err := NormalizeHost(host)
	if err != nil {
		return nil, &errRefused{rule: "direct-ip"}
	}
	if a, ok := r.Static[h]; ok {
		return a, nil
	}
	var out []netip.Addr
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(h), qt)
		resp, err := r.exchange(ctx, m)
		if err != nil {
			return nil, err
		}
		// Only records of h and its aliases: an answer can carry others.
		for _, rr := range filterAnswer(m.Question[0].Name, resp.Answer, answerFilter{}).answer {
			switch v := rr.(type) {
			case *dns.A:
				if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
					out = append(out, a)
				}
			case *dns.AAAA:
				if a, ok := netip.AddrFromSlice(v.AAAA); ok {
					out = append(out, a)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no address for %s", h)
	}
	return out, nil
}

func (r *Resolver) exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	if r.exchangeFn != nil {
		r.Forwarded.Add(1)
		return r.exchangeFn(ctx, m)
	}
	up, err := r.upstream()
	if err != nil {
		return nil, err
	}
	r.Forwarded.Add(1)
	// Asked over UDP with room for a large answer; one that still does
	// not fit comes back truncated and is asked again over TCP, so the
	// proxy and the sandboxes never take part of an answer for all of it.
	q := m.Copy()
	if q.IsEdns0() == nil {
		q.SetEdns0(upstreamUDPSize, false)
	}
	c := &dns.Client{Timeout: 5 * time.Second, UDPSize: upstreamUDPSize}
	resp, _, err := c.ExchangeContext(ctx, q, up)
	if err == nil && resp != nil && resp.Truncated {
		tc := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
		resp, _, err = tc.ExchangeContext(ctx, q, up)
	}
	return resp, err
}

// upstreamUDPSize is the EDNS buffer size asked of the upstream: the size
// DNS flag day 2020 settled on, which avoids IP fragmentation.
const upstreamUDPSize = 1232

// fitUDP truncates a reply to what the client said it can take over UDP
// (512 bytes without EDNS, its EDNS buffer size with, never less than 512
// nor more than 4096), setting TC when records had to go, so that the
// client asks again over TCP instead of reading a cut message.
func fitUDP(resp, req *dns.Msg) {
	size := dns.MinMsgSize
	if o := req.IsEdns0(); o != nil {
		size = min(max(int(o.UDPSize()), dns.MinMsgSize), 4096)
	}
	resp.Truncate(size)
}

// dnsHandler answers a sandbox's queries (answerQuery).
func (s *Server) dnsHandler(b *box) dns.HandlerFunc {
	return func(w dns.ResponseWriter, req *dns.Msg) {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		resp := s.serveQuery(ctx, b, req)
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			fitUDP(resp, req)
		}
		_ = w.WriteMsg(resp)
	}
}

// serveQuery answers a query unless the sandbox has too many in progress:
// those past the limit are refused at once, saying why.
func (s *Server) serveQuery(ctx context.Context, b *box, req *dns.Msg) *dns.Msg {
	select {
	case b.dnsSem <- struct{}{}:
		defer func() { <-b.dnsSem }()
		return s.answerQuery(ctx, b, req)
	default:
	}
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Rcode = dns.RcodeRefused
	name := "."
	if len(req.Question) == 1 {
		name = strings.TrimSuffix(req.Question[0].Name, ".")
	}
	s.refuse(b, name, DNSPort, ruleDNSLimit, "dns")
	withEDE(resp, req, dns.ExtendedErrorCodeOther, fmt.Sprintf("paddock egress: this sandbox has %d DNS queries in progress, the most it may have", cap(b.dnsSem)))
	return resp
}

// withEDE adds an extended DNS error (RFC 8914) to resp when the client
// speaks EDNS: the reason for a refusal, in words.
func withEDE(resp, req *dns.Msg, code uint16, text string) {
	if req.IsEdns0() == nil {
		return
	}
	resp.SetEdns0(1232, false)
	o := resp.IsEdns0()
	o.Option = append(o.Option, &dns.EDNS0_EDE{InfoCode: code, ExtraText: text})
}

// answerQuery decides one query of the sandbox's: names its rules allow
// are resolved (static map or upstream), every other query is refused here
// and never forwarded, so lookups cannot carry data out. What comes back
// is filtered (dnsfilter.go): records of names off the question's alias
// chain are dropped, an alias to a denied name refuses the answer, and
// forbidden addresses are removed (an answer left with none is refused).
func (s *Server) answerQuery(ctx context.Context, b *box, req *dns.Msg) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	refused := func(host, rule string) *dns.Msg {
		resp.Rcode = dns.RcodeRefused
		resp.Answer, resp.Ns = nil, nil
		if rule != "" {
			s.refuse(b, host, DNSPort, rule, "dns")
			withEDE(resp, req, dns.ExtendedErrorCodeBlocked, "paddock egress: "+host+" refused by rule "+rule)
		}
		return resp
	}
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery || req.Response {
		return refused("", "")
	}
	q := req.Question[0]
	name := strings.TrimSuffix(q.Name, ".")
	if name == "" {
		name = "."
	}
	p := b.current()
	if d := p.Decide(name); !d.Allowed {
		return refused(name, d.Rule)
	}
	if q.Qclass != dns.ClassINET {
		return refused(name, "qclass:"+className(q.Qclass))
	}
	host, _ := NormalizeHost(name) // allowed, so valid
	if addrs, ok := s.opts.Resolver.Static[host]; ok {
		var rrs []dns.RR
		for _, a := range addrs {
			hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 30}
			switch {
			case a.Is4() && q.Qtype == dns.TypeA:
				hdr.Rrtype = dns.TypeA
				rrs = append(rrs, &dns.A{Hdr: hdr, A: a.AsSlice()})
			case a.Is6() && q.Qtype == dns.TypeAAAA:
				hdr.Rrtype = dns.TypeAAAA
				rrs = append(rrs, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
			}
		}
		f := filterAnswer(q.Name, rrs, answerFilter{forbidden: s.forbiddenDst})
		if f.droppedAddrs > 0 && f.keptAddrs == 0 {
			return refused(name, "forbidden-address")
		}
		resp.Answer = f.answer
		return resp
	}
	fwd := new(dns.Msg)
	fwd.SetQuestion(dns.Fqdn(host), q.Qtype)
	fwd.RecursionDesired = true
	up, err := s.opts.Resolver.exchange(ctx, fwd)
	if err != nil || up == nil {
		resp.Rcode = dns.RcodeServerFailure
		return resp
	}
	f := filterAnswer(fwd.Question[0].Name, up.Answer, answerFilter{deny: denyRuleOf(p), forbidden: s.forbiddenDst})
	if f.deniedName != "" {
		return refused(f.deniedName, f.denyRule)
	}
	if f.droppedAddrs > 0 && f.keptAddrs == 0 {
		return refused(name, "forbidden-address")
	}
	resp.Rcode = up.Rcode
	resp.Answer = f.answer
	resp.Ns = soaOnly(up.Ns)
	return resp
}

func className(c uint16) string {
	if s, ok := dns.ClassToString[c]; ok {
		return s
	}
	return "CLASS" + strconv.Itoa(int(c))
}

type dnsCloser struct{ srv *dns.Server }

func (d dnsCloser) Close() error { return d.srv.Shutdown() }

// serveDNS starts UDP and TCP DNS on gw:53.
func (s *Server) serveDNS(b *box, gw netip.Addr) ([]io.Closer, error) {
	addr := netip.AddrPortFrom(gw, DNSPort).String()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("egress dns listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("egress dns listen: %w", err)
	}
	h := s.dnsHandler(b)
	drop := s.dropped(b, "dns")
	udp := &dns.Server{PacketConn: pc, Handler: h, DecorateReader: func(r dns.Reader) dns.Reader {
		return peerReader{Reader: r, peer: b.peer, drop: drop}
	}}
	tcp := &dns.Server{Listener: s.guard(b, ln, "dns", DNSPort, func(net.Conn) {}), Handler: h, ReadTimeout: 5 * time.Second}
	startedU, startedT := make(chan struct{}), make(chan struct{})
	udp.NotifyStartedFunc = func() { close(startedU) }
	tcp.NotifyStartedFunc = func() { close(startedT) }
	b.wg.Add(2)
	go func() { defer b.wg.Done(); _ = udp.ActivateAndServe() }()
	go func() { defer b.wg.Done(); _ = tcp.ActivateAndServe() }()
	<-startedU
	<-startedT
	return []io.Closer{dnsCloser{udp}, dnsCloser{tcp}}, nil
}

// ParseStatic parses "name=ip[,ip...];name=ip" (the daemon's static map).
func ParseStatic(s string) (map[string][]netip.Addr, error) {
	out := map[string][]netip.Addr{}
	for _, ent := range strings.Split(s, ";") {
		ent = strings.TrimSpace(ent)
		if ent == "" {
			continue
		}
		name, ips, ok := strings.Cut(ent, "=")
		if !ok {
			return nil, fmt.Errorf("static host %q: want name=ip", ent)
		}
		h, err := NormalizeHost(name)
		if err != nil {
			return nil, err
		}
		for _, ip := range strings.Split(ips, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(ip))
			if err != nil {
				return nil, fmt.Errorf("static host %q: %w", ent, err)
			}
			out[h] = append(out[h], a)
		}
	}
	return out, nil
}
