package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	p, err := NormalizePolicy(Policy{
		Allow: []string{"pypi.org", "*.pythonhosted.org", "API.GitHub.com.", "*.evil.test", "files.*.example"},
		Deny:  []string{"*.evil.test", "bad.pypi.org"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host, rule string
		allowed    bool
	}{
		{"pypi.org", "allow:pypi.org", true},
		{"PYPI.ORG.", "allow:pypi.org", true},
		{"files.pythonhosted.org", "allow:*.pythonhosted.org", true},
		{"a.b.pythonhosted.org", "allow:*.pythonhosted.org", true},
		{"pythonhosted.org", "default-deny", false},
		{"api.github.com", "allow:api.github.com", true},
		{"x.evil.test", "deny:*.evil.test", false},
		{"bad.pypi.org", "deny:bad.pypi.org", false},
		{"files.eu.example", "allow:files.*.example", true},
		{"files.a.b.example", "default-deny", false},
		{"pypi.org.evil.test", "deny:*.evil.test", false},
		{"10.0.0.1", "direct-ip", false},
		{"[::1]", "direct-ip", false},
		{"", "invalid-host", false},
		{"a..b", "invalid-host", false},
		{"xn--bcher-kva.example", "default-deny", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			d := p.Decide(tt.host)
			if d.Allowed != tt.allowed || d.Rule != tt.rule {
				t.Fatalf("Decide(%q) = %+v, want allowed=%v rule=%s", tt.host, d, tt.allowed, tt.rule)
			}
		})
	}
}

func TestNormalizeGlobRefuses(t *testing.T) {
	for _, g := range []string{"", "10.1.2.3", "::1", "a*b.com", "ex ample.com", "a/b", string(make([]byte, 300))} {
		if _, err := NormalizeGlob(g); err == nil {
			t.Errorf("NormalizeGlob(%q) accepted", g)
		}
	}
	if _, err := NormalizePolicy(Policy{Ports: []int{0}}); err == nil {
		t.Error("port 0 accepted")
	}
}

func TestForbidden(t *testing.T) {
	permit := []netip.Prefix{netip.MustParsePrefix("198.18.77.0/30")}
	tests := []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true}, {"10.1.2.3", true}, {"169.254.169.254", true}, {"192.168.1.1", true},
		{"172.16.0.1", true}, {"100.96.0.1", true}, {"100.64.0.1", true}, {"0.0.0.0", true},
		{"192.0.0.8", true}, {"192.0.2.1", true}, {"192.88.99.1", true}, {"198.18.0.1", true},
		{"198.51.100.1", true}, {"203.0.113.1", true}, {"224.0.0.1", true}, {"240.0.0.1", true},
		{"255.255.255.255", true},
		{"198.18.77.2", false}, {"198.18.77.9", true}, {"93.184.216.34", false}, {"8.8.8.8", false},
		// IPv6 special ranges.
		{"::", true}, {"::1", true}, {"fe80::1", true}, {"fd00::1", true}, {"fc00::1", true},
		{"fec0::1", true}, {"ff02::1", true}, {"100::1", true}, {"2001:db8::1", true}, {"3fff::1", true},
		{"5f00::1", true}, {"2001:2::1", true},
		// Forms that carry or reach an IPv4 address are refused whole.
		{"::1.2.3.4", true},                            // IPv4-compatible
		{"::ffff:0:93.184.216.34", true},               // IPv4-translated
		{"64:ff9b::93.184.216.34", true},               // NAT64
		{"64:ff9b:1::1", true},                         // local-use NAT64
		{"2002:5db8:d822::1", true},                    // 6to4 of 93.184.216.34
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, // Teredo
		// IPv4-mapped: judged by the IPv4 address inside.
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"::ffff:169.254.169.254", true},
		{"::ffff:93.184.216.34", false}, {"::ffff:198.18.77.2", false},
		{"2606:4700::1", false}, {"2a00:1450:4001::200e", false},
	}
	for _, tt := range tests {
		if got := Forbidden(netip.MustParseAddr(tt.ip), permit); got != tt.want {
			t.Errorf("Forbidden(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
	if !Forbidden(netip.Addr{}, nil) {
		t.Error("the zero address is allowed")
	}
}

// TestForbiddenDst: the daemon's own range and the host's addresses are
// refused even where Permitted would let them through.
func TestForbiddenDst(t *testing.T) {
	var host []netip.Addr
	var listErr error
	s := New(Options{
		OwnRanges: []netip.Prefix{netip.MustParsePrefix("8.8.0.0/16")}, // an operator's public range
		Permitted: []netip.Prefix{netip.MustParsePrefix("8.8.0.0/16"), netip.MustParsePrefix("10.9.0.0/16")},
	})
	s.hosts.list = func() ([]netip.Addr, error) { return host, listErr }
	s.hosts.ttl = time.Hour
	host = []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.9.0.5"), netip.MustParseAddr("2606:4700::5")}
	tests := []struct {
		ip   string
		want bool
	}{
		{"8.8.1.1", true},              // own range, though permitted
		{"::ffff:8.8.1.1", true},       // the same, mapped
		{"93.184.216.34", true},        // a host address
		{"::ffff:93.184.216.34", true}, // mapped
		{"2606:4700::5", true},
		{"10.9.0.5", true},  // a host address in a permitted prefix
		{"10.9.0.6", false}, // permitted, not the host's
		{"93.184.216.35", false},
		{"127.0.0.1", true},
	}
	for _, tt := range tests {
		if got := s.forbiddenDst(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("forbiddenDst(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
	// The listing is cached for its TTL, then taken again.
	host = nil
	if !s.forbiddenDst(netip.MustParseAddr("93.184.216.34")) {
		t.Error("cache not used within its TTL")
	}
	s.hosts.ttl = 0
	if s.forbiddenDst(netip.MustParseAddr("93.184.216.34")) {
		t.Error("an address the host no longer has is still refused after the TTL")
	}
	// A listing that fails keeps the last one; with none, everything is refused.
	listErr = errors.New("netlink failed")
	host = []netip.Addr{netip.MustParseAddr("93.184.216.34")}
	if s.forbiddenDst(netip.MustParseAddr("93.184.216.34")) {
		t.Error("a failed listing replaced the last good one")
	}
	fresh := New(Options{})
	fresh.hosts.list = func() ([]netip.Addr, error) { return nil, listErr }
	if !fresh.forbiddenDst(netip.MustParseAddr("93.184.216.35")) {
		t.Error("with no listing of the host's addresses, a destination was allowed")
	}
	// The real listing holds loopback.
	real := New(Options{Permitted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if !real.forbiddenDst(netip.MustParseAddr("127.0.0.1")) {
		t.Error("127.0.0.1 is not among the host's addresses")
	}
}

// clientHello captures a real ClientHello from crypto/tls.
func clientHello(t testing.TB, sni string) []byte {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_ = c.Handshake()
	}()
	br := bufio.NewReader(b)
	_, rec, err := readClientHello(br)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestReadClientHello(t *testing.T) {
	for _, sni := range []string{"up.test", "Files.PythonHosted.org", ""} {
		rec := clientHello(t, sni)
		got, raw, err := readClientHello(bufio.NewReader(bytes.NewReader(rec)))
		if err != nil {
			t.Fatalf("%q: %v", sni, err)
		}
		want, _ := NormalizeHost(sni)
		if got != want || !bytes.Equal(raw, rec) {
			t.Fatalf("SNI %q, want %q", got, want)
		}
	}
	if _, _, err := readClientHello(bufio.NewReader(bytes.NewReader([]byte("GET / HTTP/1.1\r\n\r\n")))); err == nil {
		t.Fatal("HTTP parsed as a ClientHello")
	}
}

func FuzzClientHelloSNI(f *testing.F) {
	f.Add(clientHello(f, "up.test")[5:])
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		sni, err := parseClientHelloSNI(b)
		if err == nil && sni != "" {
			if _, nerr := NormalizeHost(sni); nerr != nil {
				t.Fatalf("returned an invalid host %q", sni)
			}
		}
	})
}

func FuzzDecide(f *testing.F) {
	f.Add("*.example.com", "a.example.com")
	f.Add("a.*.b", "a.x.b")
	f.Fuzz(func(t *testing.T, glob, host string) {
		g, err := NormalizeGlob(glob)
		if err != nil {
			return
		}
		p := Policy{Allow: []string{g}}
		d := p.Decide(host)
		if d.Allowed {
			if _, err := NormalizeHost(host); err != nil {
				t.Fatalf("allowed invalid host %q", host)
			}
		}
		if (Policy{Allow: []string{g}, Deny: []string{g}}).Decide(host).Allowed {
			t.Fatal("deny did not win")
		}
	})
}

func FuzzParseStatic(f *testing.F) {
	f.Add("up.test=198.18.0.1,::1;b.test=10.0.0.1")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseStatic(s)
		if err != nil {
			return
		}
		for h := range m {
			if _, err := NormalizeHost(h); err != nil {
				t.Fatalf("accepted host %q", h)
			}
		}
	})
}
