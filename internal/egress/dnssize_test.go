package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// manyA is n A records for name, more than fit in 512 bytes when n is
// large.
func manyA(name string, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s 60 IN A 93.184.%d.%d", name, i/250, 1+i%250)
	}
	return out
}

// serveLoopbackDNS runs h on 127.0.0.1 over UDP and TCP on one port, and
// returns the address.
func serveLoopbackDNS(t *testing.T, h dns.Handler) string {
	t.Helper()
	var (
		pc   net.PacketConn
		ln   net.Listener
		addr string
	)
	// The TCP port beside a free UDP one may be taken: try others.
	for range 20 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		addr = pc.LocalAddr().String()
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no loopback port free over both UDP and TCP")
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return addr
}

// TestFitUDP: a reply larger than the client can take over UDP is cut to
// whole records with TC set; one that fits is left alone.
func TestFitUDP(t *testing.T) {
	big := func() *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("many.ok.test.", dns.TypeA)
		r := new(dns.Msg)
		r.SetReply(m)
		for _, s := range manyA("many.ok.test.", 100) {
			rr, _ := dns.NewRR(s)
			r.Answer = append(r.Answer, rr)
		}
		return r
	}
	tests := []struct {
		name      string
		edns      uint16 // 0: none
		wantTC    bool
		wantLimit int
	}{
		{"no EDNS", 0, true, 512},
		{"EDNS 1232", 1232, true, 1232},
		{"EDNS below 512 counts as 512", 100, true, 512},
		{"EDNS 4096", 4096, false, 4096},
		{"EDNS 65535 is held to 4096", 65535, false, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := new(dns.Msg)
			req.SetQuestion("many.ok.test.", dns.TypeA)
			if tt.edns != 0 {
				req.SetEdns0(tt.edns, false)
			}
			resp := big()
			fitUDP(resp, req)
			if resp.Len() > tt.wantLimit {
				t.Errorf("reply is %d bytes, limit %d", resp.Len(), tt.wantLimit)
			}
			if resp.Truncated != tt.wantTC {
				t.Errorf("TC = %v, want %v (%d records kept)", resp.Truncated, tt.wantTC, len(resp.Answer))
			}
			if !tt.wantTC && len(resp.Answer) != 100 {
				t.Errorf("kept %d of 100 records without truncating", len(resp.Answer))
			}
			if _, err := resp.Pack(); err != nil {
				t.Fatal(err)
			}
		})
	}
	small := new(dns.Msg)
	small.SetQuestion("one.ok.test.", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(small)
	rr, _ := dns.NewRR("one.ok.test. 60 IN A 93.184.216.34")
	r.Answer = []dns.RR{rr}
	fitUDP(r, small)
	if r.Truncated || len(r.Answer) != 1 {
		t.Fatalf("a small reply was changed: TC %v, %d records", r.Truncated, len(r.Answer))
	}
}

// TestSandboxDNSTruncatesOverUDP: the sandbox's resolver, over a real UDP
// socket, answers a client without EDNS with at most 512 bytes and TC set,
// and the same question over TCP with every record.
func TestSandboxDNSTruncatesOverUDP(t *testing.T) {
	f := newDNSFixture(t, Policy{Allow: []string{"*.ok.test"}}, map[string][]string{"many.ok.test.": manyA("many.ok.test.", 100)})
	addr := serveLoopbackDNS(t, f.s.dnsHandler(f.b))
	q := new(dns.Msg)
	q.SetQuestion("many.ok.test.", dns.TypeA)
	udp := &dns.Client{Timeout: 5 * time.Second}
	resp, _, err := udp.Exchange(q, addr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Compress = true // as it was sent: Len counts the wire size
	if !resp.Truncated || resp.Len() > dns.MinMsgSize || len(resp.Answer) >= 100 {
		t.Fatalf("over UDP: TC %v, %d bytes, %d records", resp.Truncated, resp.Len(), len(resp.Answer))
	}
	tcp := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	resp, _, err = tcp.Exchange(q, addr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Truncated || len(resp.Answer) != 100 {
		t.Fatalf("over TCP: TC %v, %d records, want all 100", resp.Truncated, len(resp.Answer))
	}
}

// TestResolverRetriesTruncatedOverTCP: an upstream whose UDP answer is
// truncated is asked again over TCP, and the forwarded query offers EDNS.
func TestResolverRetriesTruncatedOverTCP(t *testing.T) {
	var overUDP, overTCP, withEDNS atomic.Int32
	addr := serveLoopbackDNS(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		resp := new(dns.Msg)
		resp.SetReply(req)
		if req.IsEdns0() != nil {
			withEDNS.Add(1)
		}
		if _, ok := w.RemoteAddr().(*net.UDPAddr); ok {
			overUDP.Add(1)
			resp.Truncated = true
			_ = w.WriteMsg(resp)
			return
		}
		overTCP.Add(1)
		if req.Question[0].Qtype == dns.TypeA {
			for _, s := range manyA(req.Question[0].Name, 300) {
				rr, _ := dns.NewRR(s)
				resp.Answer = append(resp.Answer, rr)
			}
		}
		_ = w.WriteMsg(resp)
	}))
	r := &Resolver{Upstream: addr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := r.Lookup(ctx, "big.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 300 || addrs[0] != netip.MustParseAddr("93.184.0.1") {
		t.Fatalf("Lookup gave %d addresses (first %v), want 300", len(addrs), addrs[:min(1, len(addrs))])
	}
	// A and AAAA: each asked over UDP, then again over TCP.
	if overUDP.Load() != 2 || overTCP.Load() != 2 || withEDNS.Load() != 4 {
		t.Fatalf("udp %d tcp %d with EDNS %d, want 2, 2, 4", overUDP.Load(), overTCP.Load(), withEDNS.Load())
	}
}
