package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/netns"
	"github.com/paddock-dev/paddock/internal/testnet"
)

// env is a sandbox namespace behind the egress server, and an upstream
// namespace serving HTTP on 80 and HTTPS on 443.
type env struct {
	srv      *egress.Server
	mgr      *netns.Manager
	link     netns.Link
	up       *upstreamNS
	resolver *egress.Resolver
	upDNS    *countingDNS
	client   *http.Client // from inside the sandbox namespace, no proxy
	mu       sync.Mutex
	refusals []egress.Refusal
}

func (e *env) lastRefusal() egress.Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.refusals) == 0 {
		return egress.Refusal{}
	}
	return e.refusals[len(e.refusals)-1]
}

func (e *env) allRefusals() []egress.Refusal {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]egress.Refusal(nil), e.refusals...)
}

func newEnv(t testing.TB) *env { t.Helper(); return newEnvFW(t, "") }

// firewalls are the backends the namespace tests run with; the host must
// have both (CI does).
var firewalls = []string{netns.FirewallNftables, netns.FirewallIptables}

func requireFirewall(t testing.TB, fw string) {
	t.Helper()
	bin := map[string]string{netns.FirewallNftables: "nft", netns.FirewallIptables: "iptables"}[fw]
	if _, err := exec.LookPath(bin); err != nil {
		t.Skipf("needs %s for the %s backend", bin, fw)
	}
}

func newEnvFW(t testing.TB, firewall string) *env { t.Helper(); return newEnvWith(t, firewall, nil) }

// newEnvWith is newEnvFW with the server's options changed by mod.
func newEnvWith(t testing.TB, firewall string, mod func(*egress.Options)) *env {
	t.Helper()
	requireRoot(t)
	if firewall != "" {
		requireFirewall(t, firewall)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	up := newUpstreamPlan(t, 0).start(t)
	big := make([]byte, 1<<20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" && r.URL.Query().Get("small") == "" {
			_, _ = w.Write(big)
			return
		}
		if r.URL.Path == "/peer" { // which upstream connection carried the request
			fmt.Fprint(w, r.RemoteAddr)
			return
		}
		if r.URL.Path == "/hop" { // says which request fields arrived, sends its own hop fields
			w.Header().Set("Connection", "X-Hop-Resp, Keep-Alive")
			w.Header().Set("X-Hop-Resp", "for this hop only")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("X-End-To-End", "kept")
			fmt.Fprintf(w, "hop-req=%q e2e-req=%q", r.Header.Get("X-Hop-Req"), r.Header.Get("X-End-To-End"))
			return
		}
		if r.URL.Path == "/ws" { // switches to an echo protocol, as a WebSocket would
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			_, _ = io.Copy(conn, brw)
			return
		}
		if r.URL.Path == "/slow" { // a long stream, until the client goes
			testnet.SlowStream(w, r)
			return
		}
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	plain := &http.Server{Handler: h}
	go plain.Serve(up.listen(t, "80"))
	t.Cleanup(func() { plain.Close() })
	// A plain HTTP server on a port only a rule's ports list opens, and a
	// server that speaks first (a banner, then an echo) as SSH or SMTP do.
	alt := &http.Server{Handler: h}
	go alt.Serve(up.listen(t, "8080"))
	t.Cleanup(func() { alt.Close() })
	bannerLn := up.listen(t, "2222")
	go func() {
		for {
			c, err := bannerLn.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, "220 banner\r\n")
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	// A service of the host's own, on its end of that veth.
	hostLn, err := net.Listen("tcp", net.JoinHostPort(up.host, "80"))
	if err != nil {
		t.Fatal(err)
	}
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "the host's own service")
	})}
	go hostSrv.Serve(hostLn)
	t.Cleanup(func() { hostSrv.Close() })
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.Listener.Close()
	tlsSrv.Listener = up.listen(t, "443")
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	// The "host's resolver", on loopback: it counts what reaches it.
	upDNS := startCountingDNS(t, up.addr)
	upAddr := netip.MustParseAddr(up.addr)
	res := &egress.Resolver{
		Static: map[string][]netip.Addr{
			"up.test": {upAddr}, "other.test": {upAddr}, "bad.evil.test": {upAddr},
			"rebind.test": {netip.MustParseAddr("127.0.0.1")},
			"meta.test":   {netip.MustParseAddr("169.254.169.254")},
			// The host's own end of the upstream's veth: inside the
			// permitted prefix, yet the host's.
			"hostside.test": {netip.MustParseAddr(up.host)},
		},
		Upstream: upDNS.addr,
	}
	e := &env{up: up, resolver: res, upDNS: upDNS}
	opts := egress.Options{
		Logger: log, Resolver: res, HandshakeTimeout: 2 * time.Second,
		Permitted: []netip.Prefix{up.permit},
		OnRefuse: func(r egress.Refusal) {
			e.mu.Lock()
			e.refusals = append(e.refusals, r)
			e.mu.Unlock()
		},
	}
	if mod != nil {
		mod(&opts)
	}
	e.srv = egress.New(opts)
	t.Cleanup(e.srv.Close)
	ctx := context.Background()
	mgr, err := netns.New(ctx, netns.Options{
		StateDir: t.TempDir(), Range: testRange(t, 0), Logger: log, Firewall: firewall,
		Ports: netns.Ports{Proxy: egress.ProxyPort, Transparent: egress.TransparentPort, DNS: egress.DNSPort},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	e.mgr = mgr
	link, err := mgr.Setup(ctx, "egtest1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Teardown(context.Background(), "egtest1") })
	e.link = link
	pol, err := egress.NormalizePolicy(egress.Policy{Allow: []string{"up.test", "*.evil.test", "fwd.test", "rebind.test", "meta.test", "hostside.test"}, Deny: []string{"*.evil.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Attach("egtest1", link.Gateway, link.Addr, pol); err != nil {
		t.Fatal(err)
	}
	e.client = &http.Client{
		Transport: &http.Transport{
			DialContext:     dialFrom(t, link.NetNS),
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		},
		Timeout: 15 * time.Second,
	}
	return e
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// countingDNS stands for the host's resolver, on loopback: it answers
// every A query with one address and counts the queries that reach it.
type countingDNS struct {
	*testnet.CountingDNS
	addr string
}

func (c *countingDNS) count(name string) int { return c.Count(name) }

func startCountingDNS(t testing.TB, answer string) *countingDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &countingDNS{CountingDNS: testnet.ServeCountingDNS(t, pc, answer), addr: pc.LocalAddr().String()}
}

func (e *env) proxyClient(t testing.TB) *http.Client {
	pu, _ := url.Parse(fmt.Sprintf("http://%s:%d", e.link.Gateway, egress.ProxyPort))
	return &http.Client{
		Transport: &http.Transport{
			Proxy:           http.ProxyURL(pu),
			DialContext:     dialFrom(t, e.link.NetNS),
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		},
		Timeout: 15 * time.Second,
	}
}

func get(t testing.TB, c *http.Client, u string, host string) (int, string, http.Header, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, nil
}

func TestEgressRules(t *testing.T) {
	e := newEnv(t)
	pc := e.proxyClient(t)
	upURL := "http://" + e.up.addr + "/"
	tests := []struct {
		name     string
		client   *http.Client
		url      string
		host     string
		wantCode int
		wantRule string // in the 403 body and header
		wantErr  bool
	}{
		{name: "allowed host through proxy", client: pc, url: "http://up.test/", wantCode: 200},
		{name: "denied host names the rule", client: pc, url: "http://bad.evil.test/", wantCode: 403, wantRule: "deny:*.evil.test"},
		{name: "unlisted host is default-denied", client: pc, url: "http://nope.test/", wantCode: 403, wantRule: "default-deny"},
		{name: "direct IP through proxy", client: pc, url: upURL, wantCode: 403, wantRule: "direct-ip"},
		{name: "allowed name rebinding to loopback", client: pc, url: "http://rebind.test/", wantCode: 403, wantRule: "forbidden-address"},
		{name: "allowed name pointing at metadata", client: pc, url: "http://meta.test/", wantCode: 403, wantRule: "forbidden-address"},
		{name: "allowed name resolving to the host itself", client: pc, url: "http://hostside.test/", wantCode: 403, wantRule: "forbidden-address"},
		{name: "port outside 80/443", client: pc, url: "http://up.test:8080/", wantCode: 403, wantRule: "port:8080"},
		{name: "CONNECT allowed host 443", client: pc, url: "https://up.test/", wantCode: 200},
		{name: "CONNECT allowed host port 22", client: pc, url: "https://up.test:22/", wantErr: true, wantRule: "port:22"},
		{name: "transparent HTTP allowed Host", client: e.client, url: upURL, host: "up.test", wantCode: 200},
		{name: "transparent HTTP direct IP", client: e.client, url: upURL, wantCode: 403, wantRule: "direct-ip"},
		{name: "transparent HTTP denied Host", client: e.client, url: upURL, host: "bad.evil.test", wantCode: 403, wantRule: "deny:*.evil.test"},
		{name: "transparent metadata address", client: e.client, url: "http://169.254.169.254/latest/meta-data/", wantCode: 403, wantRule: "direct-ip"},
		{name: "transparent TLS by SNI", client: e.client, url: "https://up.test/", wantCode: 200},
	}
	// Transparent TLS: the sandbox's DNS answers up.test with the upstream
	// address; here the client dials the address directly with the SNI.
	e.client.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		return dialFrom(t, e.link.NetNS)(ctx, network, net.JoinHostPort(e.up.addr, port))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, hdr, err := get(t, tt.client, tt.url, tt.host)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %d %q, want an error", code, body)
				}
				if !strings.Contains(err.Error(), "Forbidden") {
					t.Fatalf("err = %v, want the proxy's 403", err)
				}
				if r := e.lastRefusal(); r.Rule != tt.wantRule {
					t.Fatalf("recorded refusal %+v, want rule %s", r, tt.wantRule)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Fatalf("status %d (%q), want %d", code, body, tt.wantCode)
			}
			if tt.wantRule != "" {
				if !strings.Contains(body, "rule "+tt.wantRule) || hdr.Get("X-Paddock-Egress-Rule") != tt.wantRule {
					t.Fatalf("body %q header %q, want rule %s", body, hdr.Get("X-Paddock-Egress-Rule"), tt.wantRule)
				}
				if r := e.lastRefusal(); r.Rule != tt.wantRule || r.Sandbox != "egtest1" {
					t.Fatalf("recorded refusal %+v, want rule %s", r, tt.wantRule)
				}
			} else if !strings.Contains(body, "hello from") {
				t.Fatalf("body %q", body)
			}
		})
	}
}

func TestEgressSNIMustMatchConnect(t *testing.T) {
	e := newEnv(t)
	conn, err := dialFrom(t, e.link.NetNS)(context.Background(), "tcp", fmt.Sprintf("%s:%d", e.link.Gateway, egress.ProxyPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "CONNECT up.test:443 HTTP/1.1\r\nHost: up.test:443\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true})
	_ = tc.SetDeadline(time.Now().Add(15 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Fatal("TLS to other.test through a CONNECT for up.test succeeded")
	}
	if r := e.lastRefusal(); r.Rule != "sni-mismatch" {
		t.Fatalf("refusal %+v, want sni-mismatch", r)
	}
}

func TestEgressDNS(t *testing.T) {
	e := newEnv(t)
	exchange := func(name string, target string) (*dns.Msg, error) {
		var resp *dns.Msg
		err := inNS(t, e.link.NetNS, func() error {
			c := &dns.Client{Timeout: 5 * time.Second}
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(name), dns.TypeA)
			var err error
			resp, _, err = c.Exchange(m, target)
			return err
		})
		return resp, err
	}
	gw := net.JoinHostPort(e.link.Gateway.String(), "53")
	tests := []struct {
		name, q, target string
		wantRcode       int
		wantForwarded   int64
		wantAnswer      string
	}{
		{name: "static allowed", q: "up.test", target: gw, wantRcode: dns.RcodeSuccess, wantAnswer: e.up.addr},
		{name: "allowed forwarded", q: "fwd.test", target: gw, wantRcode: dns.RcodeSuccess, wantForwarded: 1, wantAnswer: e.up.addr},
		{name: "denied never forwarded", q: "secret-data.bad.evil.test", target: gw, wantRcode: dns.RcodeRefused},
		{name: "unlisted never forwarded", q: "exfil.example", target: gw, wantRcode: dns.RcodeRefused},
		// A query aimed at some other server is redirected to Paddock's.
		{name: "other nameserver redirected", q: "exfil2.example", target: net.JoinHostPort(e.up.addr, "53"), wantRcode: dns.RcodeRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, upBefore := e.resolver.Forwarded.Load(), e.upDNS.count(tt.q)
			resp, err := exchange(tt.q, tt.target)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Rcode != tt.wantRcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tt.wantRcode])
			}
			if got := e.resolver.Forwarded.Load() - before; got != tt.wantForwarded {
				t.Fatalf("%d queries forwarded, want %d", got, tt.wantForwarded)
			}
			// What the upstream itself received, not the resolver's word.
			if got := e.upDNS.count(tt.q) - upBefore; int64(got) != tt.wantForwarded {
				t.Fatalf("the upstream received %d queries for %s, want %d", got, tt.q, tt.wantForwarded)
			}
			if tt.wantAnswer != "" && (len(resp.Answer) == 0 || !strings.Contains(resp.Answer[0].String(), tt.wantAnswer)) {
				t.Fatalf("answer %v, want %s", resp.Answer, tt.wantAnswer)
			}
		})
	}
}

func TestEgressFirewall(t *testing.T) {
	for _, fw := range firewalls {
		t.Run(fw, func(t *testing.T) { testEgressFirewall(t, fw) })
	}
}

func testEgressFirewall(t *testing.T, fw string) {
	e := newEnvFW(t, fw)
	if got := e.mgr.Firewall(); got != fw {
		t.Fatalf("backend %s, want %s", got, fw)
	}
	// Through the firewall the proxy answers at all.
	if code, _, _, err := get(t, e.proxyClient(t), "http://up.test/", ""); err != nil || code != 200 {
		t.Fatalf("via the proxy: %d %v", code, err)
	}
	// A host service on every address (like the daemon's TCP API).
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	targets := []string{
		fmt.Sprintf("%s:%d", e.link.Gateway, port),    // host's API on the gateway
		net.JoinHostPort(e.up.addr, "22"),             // upstream, not via proxy
		net.JoinHostPort(e.up.host, fmt.Sprint(port)), // host's other address
		"169.254.169.254:22",
	}
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c, err := dialFrom(t, e.link.NetNS)(ctx, "tcp", target)
			if err == nil {
				c.Close()
				t.Fatalf("connected to %s from the sandbox", target)
			}
			// Dropped, not refused: a refusal would mean a host stack
			// saw the packet.
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("dial %s: %v, want a timeout (dropped)", target, err)
			}
		})
	}
}

func TestEgressRulesChangeAtOnce(t *testing.T) {
	e := newEnv(t)
	pc := e.proxyClient(t)
	steps := []struct {
		allow []string
		want  int
	}{
		{allow: []string{"up.test"}, want: 200},
		{allow: nil, want: 403},
		{allow: []string{"*.test"}, want: 403}, // "*.test" does not cover "up.test"? it does: one label
	}
	steps[2].want = 200
	for i, s := range steps {
		if !e.srv.SetPolicy("egtest1", egress.Policy{Allow: s.allow}) {
			t.Fatal("sandbox not attached")
		}
		code, body, _, err := get(t, pc, "http://up.test/", "")
		if err != nil || code != s.want {
			t.Fatalf("step %d: %d %q %v, want %d", i, code, body, err, s.want)
		}
	}
}

func TestTeardownLeavesNothing(t *testing.T) {
	requireRoot(t)
	for _, fw := range firewalls {
		t.Run(fw, func(t *testing.T) { testTeardownLeavesNothing(t, fw) })
	}
}

// breakFirewall removes what another daemon on the range would on its way
// out, and reports what the firewall shows after a repair.
var breakFirewall = map[string]struct {
	remove func(m *netns.Manager, hostIf string)
	show   func(m *netns.Manager) string
}{
	netns.FirewallIptables: {
		remove: func(m *netns.Manager, hostIf string) {
			for _, c := range m.Chains() {
				_ = exec.Command("iptables", "-t", c[0], "-F", c[1]).Run()
			}
			_ = exec.Command("iptables", "-D", "INPUT", "-i", "pd"+hostIf[2:6]+"+", "-j", m.Chains()[0][1]).Run()
			_ = exec.Command("iptables", "-X", m.Chains()[0][1]).Run()
		},
		show: func(m *netns.Manager) string {
			out, _ := exec.Command("iptables", "-S", m.Chains()[0][1]).CombinedOutput()
			return string(out)
		},
	},
	netns.FirewallNftables: {
		remove: func(m *netns.Manager, _ string) {
			_ = exec.Command("nft", append([]string{"delete", "table"}, strings.Fields(m.Table())...)...).Run()
		},
		show: func(m *netns.Manager) string {
			out, _ := exec.Command("nft", append([]string{"list", "table"}, strings.Fields(m.Table())...)...).CombinedOutput()
			return string(out)
		},
	},
}

// firewallDump is everything both backends could have installed.
func firewallDump() string {
	a, _ := exec.Command("iptables-save").CombinedOutput()
	b, _ := exec.Command("nft", "list", "ruleset").CombinedOutput()
	return string(a) + string(b)
}

func testTeardownLeavesNothing(t *testing.T, fw string) {
	requireFirewall(t, fw)
	ctx := context.Background()
	id := fmt.Sprintf("tdtest%02d", slot(t))
	dir := t.TempDir()
	rng := testRange(t, 1)
	opts := netns.Options{StateDir: dir, Range: rng, Firewall: fw, Ports: netns.Ports{Proxy: 3128, Transparent: 3129, DNS: 53}}
	mgr, err := netns.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := mgr.Setup(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Teardown(context.Background(), id); _ = mgr.Close(context.Background()) })
	// A daemon restart: the old manager stops (its sandbox keeps its
	// network, the range claim is let go), a new one resets the rules and
	// Setup restores them.
	if err := mgr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mgr2, err := netns.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := mgr2.List(); len(got) != 1 || got[0] != id {
		t.Fatalf("List after restart = %v", got)
	}
	if _, err := mgr2.Setup(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	// Setup twice is harmless.
	if _, err := mgr2.Setup(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	// Another daemon on the range removed the rules on its way out:
	// Setup repairs them.
	bf := breakFirewall[fw]
	bf.remove(mgr2, l.HostIf)
	if _, err := mgr2.Setup(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	out := bf.show(mgr2)
	if !strings.Contains(out, "paddock:"+id) || !strings.Contains(strings.ToLower(out), "drop") {
		t.Fatalf("firewall not repaired:\n%s", out)
	}
	if err := mgr2.Teardown(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Teardown twice is harmless.
	if err := mgr2.Teardown(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := mgr2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	dump := firewallDump()
	for _, leak := range []string{"paddock:" + id, l.HostIf, mgr2.Table(), mgr2.Chains()[0][1]} {
		if strings.Contains(dump, leak) {
			t.Errorf("firewall still mentions %s", leak)
		}
	}
	if _, err := net.InterfaceByName(l.HostIf); err == nil {
		t.Errorf("veth %s left", l.HostIf)
	}
	if out, _ := exec.Command("ip", "netns", "list").CombinedOutput(); strings.Contains(string(out), filepath.Base(l.NetNS)) {
		t.Errorf("netns left: %s", out)
	}
	if len(mgr2.List()) != 0 {
		t.Errorf("records left: %v", mgr2.List())
	}
}

// TestFirewallSwitch: a daemon that starts with the other backend removes
// the first one's rules of its tag, and its own still hold the sandbox.
func TestFirewallSwitch(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	id := fmt.Sprintf("swtest%02d", slot(t))
	for _, tt := range []struct{ from, to string }{
		{netns.FirewallIptables, netns.FirewallNftables},
		{netns.FirewallNftables, netns.FirewallIptables},
	} {
		t.Run(tt.from+"-to-"+tt.to, func(t *testing.T) {
			requireFirewall(t, tt.from)
			requireFirewall(t, tt.to)
			dir := t.TempDir()
			opts := netns.Options{StateDir: dir, Range: testRange(t, 2), Firewall: tt.from, Ports: netns.Ports{Proxy: 3128, Transparent: 3129, DNS: 53}}
			a, err := netns.New(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Setup(ctx, id, nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Teardown(context.Background(), id) })
			// The daemon stops with its sandbox's network kept, and starts
			// again with the other backend.
			if err := a.Close(ctx); err != nil {
				t.Fatal(err)
			}
			opts.Firewall = tt.to
			b, err := netns.New(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Teardown(context.Background(), id); _ = b.Close(context.Background()) })
			if _, err := b.Setup(ctx, id, nil); err != nil {
				t.Fatal(err)
			}
			dump := firewallDump()
			old := map[string]string{netns.FirewallIptables: b.Chains()[0][1], netns.FirewallNftables: b.Table()}
			if strings.Contains(dump, old[tt.from]) {
				t.Errorf("%s's %s left after switching", tt.from, old[tt.from])
			}
			if !strings.Contains(dump, old[tt.to]) || strings.Count(dump, "paddock:"+id) == 0 {
				t.Errorf("%s rules missing after switching:\n%s", tt.to, dump)
			}
		})
	}
}
