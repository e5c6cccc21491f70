package egress

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// dnsFixture is a Server with one box and an upstream that answers from a
// table, without a network.
type dnsFixture struct {
	s        *Server
	b        *box
	mu       sync.Mutex
	refused  []Refusal
	asked    []string // names sent upstream
	upstream map[string][]string
	hold     chan struct{} // when set, upstream answers wait for it to close
}

func newDNSFixture(t testing.TB, p Policy, upstream map[string][]string, mods ...func(*Options)) *dnsFixture {
	t.Helper()
	p, err := NormalizePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	f := &dnsFixture{upstream: upstream}
	res := &Resolver{
		Static: map[string][]netip.Addr{"static.ok.test": {netip.MustParseAddr("127.0.0.1")}},
		exchangeFn: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
			if f.hold != nil {
				select {
				case <-f.hold:
				case <-ctx.Done():
				}
			}
			f.mu.Lock()
			f.asked = append(f.asked, m.Question[0].Name)
			f.mu.Unlock()
			r := new(dns.Msg)
			r.SetReply(m)
			for _, s := range f.upstream[m.Question[0].Name] {
				rr, err := dns.NewRR(s)
				if err != nil {
					t.Fatalf("fixture record %q: %v", s, err)
				}
				if _, ok := rr.(*dns.SOA); ok || rr.Header().Rrtype == dns.TypeNS && strings.Contains(s, "AUTH") {
					r.Ns = append(r.Ns, rr)
					continue
				}
				r.Answer = append(r.Answer, rr)
			}
			return r, nil
		},
	}
	opts := Options{Resolver: res, OnRefuse: func(r Refusal) {
		f.mu.Lock()
		f.refused = append(f.refused, r)
		f.mu.Unlock()
	}}
	for _, m := range mods {
		m(&opts)
	}
	f.s = New(opts)
	f.s.hosts.list = func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("203.0.113.200")}, nil }
	f.b = f.s.newBox("dnstest", netip.MustParseAddr("100.64.0.2"), p)
	return f
}

func (f *dnsFixture) ask(name string, qtype, qclass uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.Question[0].Qclass = qclass
	return f.s.answerQuery(context.Background(), f.b, m)
}

func (f *dnsFixture) last() Refusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.refused) == 0 {
		return Refusal{}
	}
	return f.refused[len(f.refused)-1]
}

func TestAnswerQueryFilters(t *testing.T) {
	upstream := map[string][]string{
		"cdn.ok.test.": {"cdn.ok.test. 60 IN CNAME edge.evil.test.", "edge.evil.test. 60 IN A 93.184.216.34"},
		"extra.ok.test.": {"extra.ok.test. 60 IN A 93.184.216.34",
			"victim.test. 60 IN A 93.184.216.35", "ok.test. 60 IN A 93.184.216.36"},
		"chain.ok.test.": {"edge.cdn.example. 60 IN A 93.184.216.34", // out of order
			"mid.cdn.example. 60 IN CNAME edge.cdn.example.", "chain.ok.test. 60 IN CNAME mid.cdn.example."},
		"mixed.ok.test.":    {"mixed.ok.test. 60 IN A 127.0.0.1", "mixed.ok.test. 60 IN A 93.184.216.34", "mixed.ok.test. 60 IN A 10.1.2.3"},
		"rebind.ok.test.":   {"rebind.ok.test. 60 IN A 169.254.169.254", "rebind.ok.test. 60 IN AAAA ::ffff:127.0.0.1"},
		"hostaddr.ok.test.": {"hostaddr.ok.test. 60 IN A 203.0.113.200"},
		"v6.ok.test.":       {"v6.ok.test. 60 IN AAAA 64:ff9b::808:808", "v6.ok.test. 60 IN AAAA 2606:4700::1"},
		"a.dn.ok.test.": {"dn.ok.test. 60 IN DNAME evil.test.", "a.dn.ok.test. 60 IN CNAME a.evil.test.",
			"a.evil.test. 60 IN A 93.184.216.34"},
		"a.good.ok.test.": {"good.ok.test. 60 IN DNAME fine.example.", "a.good.ok.test. 60 IN CNAME a.fine.example.",
			"a.fine.example. 60 IN A 93.184.216.34", "unrelated.ok.test. 60 IN DNAME fine.example."},
		"loop.ok.test.": {"ok.test. 60 IN DNAME loop.ok.test.", "loop.ok.test. 60 IN A 93.184.216.34"},
		"neg.ok.test.": {"ok.test. 60 IN SOA ns.ok.test. admin.ok.test. 1 2 3 4 5",
			"ok.test. 60 IN NS AUTH.attacker.example."},
	}
	f := newDNSFixture(t, Policy{Allow: []string{"*.ok.test", "*.evil.test"}, Deny: []string{"*.evil.test"}}, upstream)
	answers := func(m *dns.Msg) []string {
		var out []string
		for _, rr := range m.Answer {
			out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
		}
		return out
	}
	tests := []struct {
		name, q   string
		qtype     uint16
		rcode     int
		want      []string // substrings, one per kept record, in order
		wantRule  string   // a refusal recorded with this rule
		wantHost  string
		forwarded bool
	}{
		{name: "an alias to a denied name is refused", q: "cdn.ok.test", rcode: dns.RcodeRefused,
			wantRule: "deny:*.evil.test", wantHost: "edge.evil.test", forwarded: true},
		{name: "records of other names are dropped", q: "extra.ok.test", rcode: dns.RcodeSuccess,
			want: []string{"extra.ok.test. 60 IN A 93.184.216.34"}, forwarded: true},
		{name: "an alias chain in any order is kept", q: "chain.ok.test", rcode: dns.RcodeSuccess,
			want: []string{"edge.cdn.example.", "mid.cdn.example.", "chain.ok.test."}, forwarded: true},
		{name: "forbidden addresses are removed", q: "mixed.ok.test", rcode: dns.RcodeSuccess,
			want: []string{"93.184.216.34"}, forwarded: true},
		{name: "an answer of forbidden addresses only is refused", q: "rebind.ok.test", rcode: dns.RcodeRefused,
			wantRule: "forbidden-address", wantHost: "rebind.ok.test", forwarded: true},
		{name: "the host's own address is removed", q: "hostaddr.ok.test", rcode: dns.RcodeRefused,
			wantRule: "forbidden-address", wantHost: "hostaddr.ok.test", forwarded: true},
		{name: "NAT64 is removed, other IPv6 kept", q: "v6.ok.test", qtype: dns.TypeAAAA, rcode: dns.RcodeSuccess,
			want: []string{"2606:4700::1"}, forwarded: true},
		{name: "a DNAME to a denied name is refused", q: "a.dn.ok.test", rcode: dns.RcodeRefused,
			wantRule: "deny:*.evil.test", wantHost: "a.evil.test", forwarded: true},
		{name: "a DNAME that applies is kept, others dropped", q: "a.good.ok.test", rcode: dns.RcodeSuccess,
			want: []string{"good.ok.test. 60 IN DNAME", "a.good.ok.test. 60 IN CNAME", "a.fine.example."}, forwarded: true},
		{name: "a self-nesting DNAME ends", q: "loop.ok.test", rcode: dns.RcodeSuccess,
			want: []string{"ok.test. 60 IN DNAME", "loop.ok.test. 60 IN A"}, forwarded: true},
		{name: "negative answers keep their SOA only", q: "neg.ok.test", rcode: dns.RcodeSuccess, forwarded: true},
		{name: "a static forbidden answer is refused", q: "static.ok.test", rcode: dns.RcodeRefused,
			wantRule: "forbidden-address", wantHost: "static.ok.test"},
		{name: "a denied name is not forwarded", q: "x.evil.test", rcode: dns.RcodeRefused, wantRule: "deny:*.evil.test", wantHost: "x.evil.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.mu.Lock()
			nAsked, nRefused := len(f.asked), len(f.refused)
			f.mu.Unlock()
			qt := tt.qtype
			if qt == 0 {
				qt = dns.TypeA
			}
			m := f.ask(tt.q, qt, dns.ClassINET)
			if m.Rcode != tt.rcode {
				t.Fatalf("rcode %s, want %s (%v)", dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode], answers(m))
			}
			got := answers(m)
			if len(got) != len(tt.want) {
				t.Fatalf("answer %q, want %d records like %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Fatalf("record %d %q, want %q", i, got[i], tt.want[i])
				}
			}
			f.mu.Lock()
			asked, refused := f.asked[nAsked:], f.refused[nRefused:]
			f.mu.Unlock()
			if (len(asked) > 0) != tt.forwarded {
				t.Fatalf("forwarded %v, want %v", asked, tt.forwarded)
			}
			switch {
			case tt.wantRule == "" && len(refused) > 0:
				t.Fatalf("refusals %+v recorded", refused)
			case tt.wantRule != "" && (len(refused) != 1 || refused[0].Rule != tt.wantRule || refused[0].Host != tt.wantHost || refused[0].Via != "dns"):
				t.Fatalf("refusals %+v, want one of %s by %s", refused, tt.wantHost, tt.wantRule)
			}
			if tt.name == "negative answers keep their SOA only" {
				if len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
					t.Fatalf("authority %v", m.Ns)
				}
			}
		})
	}
}

func TestAnswerQueryClass(t *testing.T) {
	f := newDNSFixture(t, Policy{Allow: []string{"ok.test"}, Deny: []string{"bad.test"}}, nil)
	for _, tt := range []struct {
		q, rule string
		class   uint16
	}{
		{"ok.test", "qclass:CH", dns.ClassCHAOS},
		{"ok.test", "qclass:ANY", dns.ClassANY},
		{"bad.test", "deny:bad.test", dns.ClassCHAOS},
		{"other.test", "default-deny", dns.ClassHESIOD},
	} {
		m := f.ask(tt.q, dns.TypeTXT, tt.class)
		if m.Rcode != dns.RcodeRefused {
			t.Errorf("%s class %d: rcode %d", tt.q, tt.class, m.Rcode)
		}
		if r := f.last(); r.Rule != tt.rule || r.Host != tt.q {
			t.Errorf("%s class %d recorded %+v, want rule %s", tt.q, tt.class, r, tt.rule)
		}
	}
	if len(f.asked) != 0 {
		t.Fatalf("forwarded %v", f.asked)
	}
}

// TestLookupKeepsOnlyItsNames: the proxy's own resolution uses only the
// addresses of the name and its aliases.
func TestLookupKeepsOnlyItsNames(t *testing.T) {
	r := &Resolver{exchangeFn: func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
		resp := new(dns.Msg)
		resp.SetReply(m)
		if m.Question[0].Qtype == dns.TypeA {
			for _, s := range []string{"api.test. 60 IN CNAME edge.test.", "edge.test. 60 IN A 93.184.216.34", "victim.test. 60 IN A 93.184.216.99"} {
				rr, _ := dns.NewRR(s)
				resp.Answer = append(resp.Answer, rr)
			}
		}
		return resp, nil
	}}
	addrs, err := r.Lookup(context.Background(), "api.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0] != netip.MustParseAddr("93.184.216.34") {
		t.Fatalf("Lookup = %v", addrs)
	}
}
