package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzDNSQuery runs queries and upstream answers built from fuzz bytes
// through the resolver's decision logic, without a network: a name the
// rules do not allow is never forwarded, and nothing the sandbox gets
// holds a forbidden address or a record of another name.
func FuzzDNSQuery(f *testing.F) {
	seed := func(name string, qtype uint16, answers ...string) {
		q := new(dns.Msg)
		q.SetQuestion(name, qtype)
		qb, _ := q.Pack()
		a := new(dns.Msg)
		a.SetReply(q)
		for _, s := range answers {
			rr, err := dns.NewRR(s)
			if err != nil {
				f.Fatal(err)
			}
			a.Answer = append(a.Answer, rr)
		}
		ab, _ := a.Pack()
		f.Add(qb, ab)
	}
	seed("api.ok.test.", dns.TypeA, "api.ok.test. 60 IN A 93.184.216.34", "other.test. 60 IN A 93.184.216.35")
	seed("cdn.ok.test.", dns.TypeA, "cdn.ok.test. 60 IN CNAME x.evil.test.", "x.evil.test. 60 IN A 93.184.216.34")
	seed("a.dn.ok.test.", dns.TypeAAAA, "dn.ok.test. 60 IN DNAME ok.test.", "a.ok.test. 60 IN AAAA ::1")
	seed("x.evil.test.", dns.TypeTXT)
	seed("static.ok.test.", dns.TypeA)
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}, []byte{})

	f.Fuzz(func(t *testing.T, query, answer []byte) {
		req := new(dns.Msg)
		if req.Unpack(query) != nil {
			return
		}
		up := new(dns.Msg)
		upErr := up.Unpack(answer)
		fx := newDNSFixture(t, Policy{Allow: []string{"*.ok.test", "*.evil.test"}, Deny: []string{"*.evil.test"}}, nil)
		forwarded := 0
		fx.s.opts.Resolver.exchangeFn = func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
			forwarded++
			if upErr != nil {
				return nil, upErr
			}
			r := up.Copy()
			r.Id = m.Id
			return r, nil
		}
		resp := fx.s.answerQuery(context.Background(), fx.b, req)
		if _, err := resp.Pack(); err != nil {
			t.Fatalf("the answer does not pack: %v", err)
		}
		allowed := len(req.Question) == 1 && req.Opcode == dns.OpcodeQuery && !req.Response &&
			req.Question[0].Qclass == dns.ClassINET && fx.b.policy.Decide(strings.TrimSuffix(req.Question[0].Name, ".")).Allowed
		if forwarded > 0 && !allowed {
			t.Fatalf("forwarded a query the rules refuse: %v", req.Question)
		}
		if !allowed && (resp.Rcode != dns.RcodeRefused || len(resp.Answer) > 0) {
			t.Fatalf("a refused query was answered: %v", resp)
		}
		owners := map[string]bool{}
		if len(req.Question) == 1 {
			owners[canonical(req.Question[0].Name)] = true
		}
		for _, rr := range resp.Answer {
			switch v := rr.(type) {
			case *dns.CNAME:
				owners[canonical(v.Target)] = true
			case *dns.DNAME:
				continue
			}
		}
		for _, rr := range resp.Answer {
			var a netip.Addr
			switch v := rr.(type) {
			case *dns.A:
				a, _ = netip.AddrFromSlice(v.A)
			case *dns.AAAA:
				a, _ = netip.AddrFromSlice(v.AAAA)
			case *dns.DNAME:
				continue
			}
			if a.IsValid() && fx.s.forbiddenDst(a) {
				t.Fatalf("handed out a forbidden address: %v", rr)
			}
			if _, isCNAME := rr.(*dns.CNAME); !isCNAME && !owners[canonical(rr.Header().Name)] && !dnameSynth(resp, rr.Header().Name) {
				t.Fatalf("handed out a record of another name: %v (question %v)", rr, req.Question)
			}
		}
	})
}

// dnameSynth reports whether name lies under a DNAME target of resp.
func dnameSynth(resp *dns.Msg, name string) bool {
	for _, rr := range resp.Answer {
		if d, ok := rr.(*dns.DNAME); ok && strings.HasSuffix(canonical(name), "."+canonical(d.Target)) {
			return true
		}
	}
	return false
}

// FuzzReadClientHello checks the TLS record framing: a record is taken
// whole, as its header says, or not at all, and a name it yields is a
// valid host name.
func FuzzReadClientHello(f *testing.F) {
	f.Add(clientHello(f, "up.test"))
	f.Add(clientHello(f, ""))
	f.Add([]byte{0x16, 3, 1, 0, 0})
	f.Add([]byte{0x16, 3, 1, 0xff, 0xff, 1})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sni, rec, err := readClientHello(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if len(rec) != 5+n || !bytes.Equal(rec, b[:len(rec)]) || rec[0] != recordTypeHandshake || n > maxRecordLen {
			t.Fatalf("record of %d bytes from a header saying %d", len(rec), n)
		}
		if sni != "" {
			if h, err := NormalizeHost(sni); err != nil || h != sni {
				t.Fatalf("SNI %q is not a normalised host name", sni)
			}
		}
	})
}

// FuzzNormalizeHeaderName: an accepted name is canonical, made of token
// characters, the input's own name, and never one the proxy owns.
func FuzzNormalizeHeaderName(f *testing.F) {
	for _, s := range []string{"authorization", "X-Api-Key", "proxy-authorization", "Host", "bad name", "x-\u00e9", "te"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		n, err := NormalizeHeaderName(h)
		if err != nil {
			return
		}
		if n != textproto.CanonicalMIMEHeaderKey(n) || !strings.EqualFold(n, h) {
			t.Fatalf("%q -> %q: not the canonical form of the input", h, n)
		}
		for i := 0; i < len(n); i++ {
			if !isTokenChar(n[i]) {
				t.Fatalf("%q: character %q", n, n[i])
			}
		}
		if again, err := NormalizeHeaderName(n); err != nil || again != n {
			t.Fatalf("%q: not stable (%q, %v)", n, again, err)
		}
		if forbiddenHeaders[n] || strings.HasPrefix(n, "Proxy-") {
			t.Fatalf("accepted the proxy's own header %q", n)
		}
	})
}

// FuzzReadRequests reads requests from a sandbox's stream as the
// transparent proxy and the tunnels do: the header budget holds, and
// anything Go's parser takes for a request is never sniffed as "other",
// which on a listed port would be spliced with its Host unchecked.
func FuzzReadRequests(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: b.test\r\n\r\n"))
	f.Add([]byte("POST /u HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte("POST /u HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nX: " + strings.Repeat("y", 70<<10) + "\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 {
			if _, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b))); err == nil {
				if k := sniffKind(b[:min(len(b), 4096)]); k == kindOther || k == kindTLS {
					t.Fatalf("a request Go parses is sniffed as %d: %q", k, b[:min(len(b), 80)])
				}
			}
		}
		hb := &headerBudget{r: bytes.NewReader(b)}
		br := bufio.NewReader(hb)
		for range 16 {
			req, err := readRequest(hb, br)
			if err != nil {
				if hb.armed {
					t.Fatal("the budget stayed armed after a read")
				}
				return
			}
			if host, port, ok := splitHostPort(req.Host, 80); ok && (port < 1 || port > 65535 || strings.ContainsAny(host, "[]")) {
				t.Fatalf("Host %q split into %q %d", req.Host, host, port)
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
			req.Body.Close()
		}
	})
}
