package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
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
		for _, rr := range resp.Answer {
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
	up, err := r.upstream()
	if err != nil {
		return nil, err
	}
	r.Forwarded.Add(1)
	c := &dns.Client{Timeout: 5 * time.Second}
	resp, _, err := c.ExchangeContext(ctx, m, up)
	return resp, err
}

// dnsHandler answers a sandbox's queries: names its rules allow are
// resolved (static map or upstream), every other query is refused here and
// never forwarded, so lookups cannot carry data out.
func (s *Server) dnsHandler(b *box) dns.HandlerFunc {
	return func(w dns.ResponseWriter, req *dns.Msg) {
		resp := new(dns.Msg)
		resp.SetReply(req)
		resp.RecursionAvailable = true
		if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
			resp.Rcode = dns.RcodeRefused
			_ = w.WriteMsg(resp)
			return
		}
		q := req.Question[0]
		name := strings.TrimSuffix(q.Name, ".")
		d := b.current().Decide(name)
		if !d.Allowed || q.Qclass != dns.ClassINET {
			s.refuse(b, name, DNSPort, d.Rule, "dns")
			resp.Rcode = dns.RcodeRefused
			_ = w.WriteMsg(resp)
			return
		}
		host, _ := NormalizeHost(name)
		if addrs, ok := s.opts.Resolver.Static[host]; ok {
			for _, a := range addrs {
				hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 30}
				switch {
				case a.Is4() && q.Qtype == dns.TypeA:
					hdr.Rrtype = dns.TypeA
					resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
				case a.Is6() && q.Qtype == dns.TypeAAAA:
					hdr.Rrtype = dns.TypeAAAA
					resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
				}
			}
			_ = w.WriteMsg(resp)
			return
		}
		fwd := new(dns.Msg)
		fwd.SetQuestion(dns.Fqdn(host), q.Qtype)
		fwd.RecursionDesired = true
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		up, err := s.opts.Resolver.exchange(ctx, fwd)
		if err != nil || up == nil {
			resp.Rcode = dns.RcodeServerFailure
			_ = w.WriteMsg(resp)
			return
		}
		resp.Rcode = up.Rcode
		resp.Answer = up.Answer
		resp.Ns = up.Ns
		_ = w.WriteMsg(resp)
	}
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
	tcp := &dns.Server{Listener: &peerListener{Listener: ln, peer: b.peer, drop: drop}, Handler: h, ReadTimeout: 5 * time.Second}
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
