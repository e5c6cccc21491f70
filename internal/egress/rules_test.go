package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
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
		{"100.96.0.1", true}, {"::1", true}, {"fe80::1", true}, {"fd00::1", true}, {"::ffff:127.0.0.1", true},
		{"0.0.0.0", true}, {"198.18.77.2", false}, {"198.18.77.9", true}, {"93.184.216.34", false},
		{"2606:4700::1", false},
	}
	for _, tt := range tests {
		if got := Forbidden(netip.MustParseAddr(tt.ip), permit); got != tt.want {
			t.Errorf("Forbidden(%s) = %v, want %v", tt.ip, got, tt.want)
		}
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
