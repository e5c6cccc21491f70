package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/paddock-dev/paddock/internal/testnet"
)

// netUpstream is a network namespace standing for the internet: reachable
// from the host over a veth whose addresses exist only between the two.
func netUpstream(t *testing.T, name, hostIf, hostCIDR, nsAddr string) {
	t.Helper()
	newTestHost(t, name, hostIf, hostCIDR, nsAddr)
	// The listener is created inside the namespace; it stays there.
	ln := listenInNetns(t, name, nsAddr+":80")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" { // a long stream, until the client goes
			testnet.SlowStream(w, r)
			return
		}
		fmt.Fprintf(w, "upstream says hello to %s", r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// upstreamDNS is a resolver in a test host's namespace standing for the
// daemon's upstream: it answers every A query with one address and counts,
// per name, the queries that reach it.
type upstreamDNS struct{ *testnet.CountingDNS }

func (u upstreamDNS) count(name string) int { return u.Count(name) }

// newUpstreamDNS serves DNS on addr:53 (UDP) in the namespace ns.
func newUpstreamDNS(t *testing.T, ns, addr string) upstreamDNS {
	t.Helper()
	pc := listenPacketInNetns(t, ns, net.JoinHostPort(addr, "53"))
	return upstreamDNS{testnet.ServeCountingDNS(t, pc, addr)}
}

// pyGet fetches a URL from inside the sandbox the way most programs do
// (urllib honours HTTP_PROXY) and prints the status and body.
const pyGet = `
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=20)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// pyRaw connects straight to an address (ignoring any proxy) and sends a
// GET with the given Host header.
const pyRaw = `
import sys, socket
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sys.argv[3]).encode())
    print(s.recv(4096).decode(errors="replace"))
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// pyStream reads a streamed response through the proxy until the
// connection ends, and says how it ended.
const pyStream = `
import sys, socket, time
s = socket.create_connection((sys.argv[1], 3128), timeout=40)
s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2]).encode())
start, n = time.time(), 0
while True:
    try:
        d = s.recv(4096)
    except Exception as e:
        print("ERR", type(e).__name__, e)
        break
    if not d:
        print("CLOSED after %d bytes and %.0f s" % (n, time.time() - start))
        break
    n += len(d)
`

const pyResolve = `
import sys, socket
try:
    print(socket.gethostbyname(sys.argv[1]))
except Exception as e:
    print("ERR", type(e).__name__, e)
`

func leftovers(id, tag string) []string {
	var out []string
	if b, _ := exec.Command("ip", "-br", "link").CombinedOutput(); strings.Contains(string(b), "pd"+tag) {
		out = append(out, "veth")
	}
	if b, _ := exec.Command("iptables-save").CombinedOutput(); strings.Contains(string(b), "paddock:"+id) {
		out = append(out, "iptables rules")
	}
	if b, _ := exec.Command("nft", "list", "ruleset").CombinedOutput(); strings.Contains(string(b), "paddock:"+id) {
		out = append(out, "nftables elements")
	}
	if b, _ := exec.Command("ip", "netns", "list").CombinedOutput(); strings.Contains(string(b), id) {
		out = append(out, "netns")
	}
	return out
}

func TestNetworkEgress(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables")
	}
	// A range and upstream of its own, also apart from other runs on
	// this host: daemons of other tests use the default range.
	plan := newNetPlan(t, 0)
	up := plan.Upstream
	netUpstream(t, plan.NS, plan.HostIf, plan.HostCIDR, up)
	// The daemon's upstream resolver, in the test host's namespace: it
	// answers every name, so only the daemon's rules keep one from resolving.
	upDNS := newUpstreamDNS(t, plan.NS, up)
	// The iptables backend; TestNetworkNftables covers nftables.
	d := startDaemon(t, daemonOpts{listen: true, env: []string{
		"PADDOCK_FIREWALL=iptables",
		"PADDOCK_NETWORK_RANGE=" + plan.Range,
		fmt.Sprintf("PADDOCK_EGRESS_DNS_STATIC=up.test=%s;other.test=%s", up, up),
		"PADDOCK_EGRESS_PERMIT=" + plan.Permit,
		"PADDOCK_EGRESS_DNS_UPSTREAM=" + net.JoinHostPort(up, "53"),
	}})
	netTag := d.netTag()
	id := strings.TrimSpace(d.must("create", "--allow-host", "up.test", "--allow-host", "fwd.test", "--allow-host", "*.evil.test", "--deny-host", "*.evil.test"))
	py := func(script string, args ...string) string {
		t.Helper()
		out, _, _ := d.run(append([]string{"exec", id, "--", "python3", "-c", script}, args...)...)
		return strings.TrimSpace(out)
	}
	gw := strings.TrimSpace(py(`import os; print(os.environ["HTTP_PROXY"].split("//")[1].split(":")[0])`))
	_, apiPort, _ := net.SplitHostPort(d.listen)

	cases := []struct {
		name   string
		script string
		args   []string
		want   string
	}{
		{"allowed host reachable by name", pyGet, []string{"http://up.test/"}, "200 upstream says hello to up.test"},
		{"denied host refused with the rule", pyGet, []string{"http://x.evil.test/"}, "403 paddock egress: x.evil.test:80 refused by rule deny:*.evil.test"},
		{"unlisted host refused", pyGet, []string{"http://other.test/"}, "refused by rule default-deny"},
		{"port 22 refused", pyGet, []string{"http://up.test:22/"}, "refused by rule port:22"},
		{"CONNECT to port 22 refused", pyGet, []string{"https://up.test:22/"}, "Tunnel connection failed: 403"},
		{"direct IP refused", pyRaw, []string{up, "80", up}, "refused by rule direct-ip"},
		{"direct IP with an allowed Host is governed", pyRaw, []string{up, "80", "up.test"}, "upstream says hello to up.test"},
		{"metadata address refused", pyRaw, []string{"169.254.169.254", "80", "169.254.169.254"}, "refused by rule direct-ip"},
		// Dropped (a timeout), not refused: a refusal would mean a host
		// stack answered. The same probe reaches what the sandbox may use.
		{"daemon TCP API unreachable", pyConnect, []string{gw, apiPort}, "ERR TimeoutError"},
		{"the proxy port on the same address answers", pyConnect, []string{gw, "3128"}, "CONNECTED"},
		{"upstream other port unreachable", pyConnect, []string{up, "22"}, "ERR TimeoutError"},
		{"the upstream's port 80 answers", pyConnect, []string{up, "80"}, "CONNECTED"},
		{"allowed name resolves", pyResolve, []string{"up.test"}, up},
		{"allowed name resolves through the upstream", pyResolve, []string{"fwd.test"}, up},
		{"denied name does not resolve", pyResolve, []string{"x.evil.test"}, "ERR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := py(c.script, c.args...); !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	t.Run("the host cannot use the sandbox's proxy or resolver", func(t *testing.T) {
		// The host routes to the gateway (its own address, over lo). The
		// firewall drops packets to the daemon's range that do not come
		// from a sandbox's own veth, so the connection never opens; were
		// it to open, the listeners serve the sandbox's address only and
		// must not answer (the unit tests of internal/egress check that
		// layer alone).
		c, err := net.DialTimeout("tcp", net.JoinHostPort(gw, "3128"), 3*time.Second)
		if err == nil {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprint(c, "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n")
			if b, _ := io.ReadAll(c); len(b) > 0 {
				t.Fatalf("the proxy answered the host: %q", b)
			}
			t.Fatal("the host opened a connection to the sandbox's proxy: the firewall let it through")
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("dial from the host: %v, want a timeout (dropped)", err)
		}
		m := new(dns.Msg)
		m.SetQuestion("up.test.", dns.TypeA)
		if r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, net.JoinHostPort(gw, "53")); err == nil {
			t.Fatalf("the resolver answered the host: %v", r)
		}
	})

	t.Run("only allowed names reach the upstream resolver", func(t *testing.T) {
		if n := upDNS.count("fwd.test"); n == 0 {
			t.Fatal("the allowed name never reached the upstream: the resolver is not what answered")
		}
		for _, name := range []string{"x.evil.test", "up.test"} { // denied; answered from the static map
			if n := upDNS.count(name); n != 0 {
				t.Fatalf("%s reached the upstream %d times", name, n)
			}
		}
	})

	t.Run("mode none has loopback only", func(t *testing.T) {
		none := strings.TrimSpace(d.must("create"))
		t.Cleanup(func() { d.run("rm", none) })
		out, _, _ := d.run("exec", none, "--", "ls", "/sys/class/net")
		if strings.Fields(out) == nil || strings.Join(strings.Fields(out), " ") != "lo" {
			t.Fatalf("interfaces: %q", out)
		}
		// The probe that reaches the upstream from the egress sandbox (above).
		out, _, _ = d.run("exec", none, "--", "python3", "-c", pyConnect, up, "80")
		if !strings.Contains(out, "Network is unreachable") {
			t.Fatalf("connect from a none sandbox: %q", out)
		}
		out, _, _ = d.run("exec", none, "--", "python3", "-c", pyResolve, "up.test")
		if !strings.Contains(out, "ERR") {
			t.Fatalf("resolve from a none sandbox: %q", out)
		}
	})

	t.Run("info names the firewall", func(t *testing.T) {
		if out := d.must("info"); !strings.Contains(out, "firewall iptables") {
			t.Fatalf("paddock info:\n%s", out)
		}
	})
	t.Run("IPv6 off on both ends", func(t *testing.T) { checkIPv6Off(t, readNetLink(t, d, id)) })
	t.Run("packets the firewall drops", func(t *testing.T) {
		checkFirewallPackets(t, d, plan, 0, id, func() string {
			return strings.TrimSpace(d.must("create", "--allow-host", "up.test"))
		})
	})

	t.Run("exec grant ends with the command", func(t *testing.T) {
		out, _, _ := d.run("exec", "--allow-host", "other.test", id, "--", "python3", "-c", pyGet, "http://other.test/")
		if !strings.Contains(out, "200 upstream says hello") {
			t.Fatalf("with the grant: %q", out)
		}
		if got := py(pyGet, "http://other.test/"); !strings.Contains(got, "refused by rule default-deny") {
			t.Fatalf("after the command: %q", got)
		}
	})

	t.Run("rules change at once", func(t *testing.T) {
		out := d.must("net", "allow", id, "other.test")
		if !strings.Contains(out, "other.test") {
			t.Fatalf("net allow: %s", out)
		}
		if got := py(pyGet, "http://other.test/"); !strings.Contains(got, "200 upstream says hello") {
			t.Fatalf("after allow: %q", got)
		}
		d.must("net", "deny", id, "other.test")
		if got := py(pyGet, "http://other.test/"); !strings.Contains(got, "refused by rule deny:other.test") {
			t.Fatalf("after deny: %q", got)
		}
		// A grant does not beat a deny rule.
		if out, _, _ := d.run("exec", "--allow-host", "other.test", id, "--", "python3", "-c", pyGet, "http://other.test/"); !strings.Contains(out, "deny:other.test") {
			t.Fatalf("grant beat a deny rule: %q", out)
		}
		if show := d.must("net", "show", id); !strings.Contains(show, "deny: *.evil.test other.test") {
			t.Fatalf("net show: %s", show)
		}
	})

	t.Run("a deny rule closes an open connection", func(t *testing.T) {
		done := make(chan string, 1)
		go func() {
			out, _, _ := d.run("exec", id, "--", "python3", "-c", pyStream, gw, "http://up.test/slow")
			done <- strings.TrimSpace(out)
		}()
		time.Sleep(3 * time.Second) // the stream is flowing
		d.must("net", "deny", id, "up.test")
		t.Cleanup(func() { d.must("net", "allow", id, "up.test") })
		select {
		case out := <-done:
			if !strings.HasPrefix(out, "CLOSED after") || strings.Contains(out, "after 0 bytes") {
				t.Fatalf("stream: %q", out)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the stream outlived the deny rule")
		}
		if led := d.must("ledger", id, "--json"); !strings.Contains(led, "rules-changed") || !strings.Contains(led, "deny:up.test") {
			t.Fatalf("ledger has no rules-changed refusal:\n%s", led)
		}
	})

	t.Run("do with allow-host", func(t *testing.T) {
		out, _, _ := d.run("do", "--allow-host", "up.test", "--", "python3", "-c", pyGet, "http://up.test/")
		if !strings.Contains(out, "200 upstream says hello to up.test") {
			t.Fatalf("paddock do: %q", out)
		}
	})

	t.Run("refusals are in the ledger", func(t *testing.T) {
		if out := d.must("ledger", id); !strings.Contains(out, "egress_refused") {
			t.Fatalf("ledger has no egress refusal:\n%s", out)
		}
	})

	// Before this daemon's chains are rebuilt at its start, nothing from
	// a live sandbox may fall through to the host's own rules.
	t.Run("no fall-through during a restart", func(t *testing.T) {
		checkRestartWindow(t, d, id, apiPort, func() { d.stop(); d.start() })
	})

	t.Run("restart keeps rules, destroy leaves nothing", func(t *testing.T) {
		d.stop()
		d.start()
		if got := py(pyGet, "http://up.test/"); !strings.Contains(got, "200 upstream says hello") {
			t.Fatalf("after restart: %q", got)
		}
		if got := py(pyGet, "http://other.test/"); !strings.Contains(got, "deny:other.test") {
			t.Fatalf("after restart, rules lost: %q", got)
		}
		d.must("rm", id)
		if l := leftovers(id, netTag); len(l) > 0 {
			t.Fatalf("left after destroy: %v", l)
		}
	})

	t.Run("daemon start removes an orphan namespace", func(t *testing.T) {
		d.stop()
		orphan := "paddock-" + netTag + "-orphan1"
		if out, err := exec.Command("ip", "netns", "add", orphan).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", orphan).Run() })
		d.start()
		if out, _ := exec.Command("ip", "netns", "list").CombinedOutput(); strings.Contains(string(out), orphan) {
			t.Fatalf("orphan namespace kept: %s", out)
		}
	})
}

func TestNetworkBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"create", "--network", "wifi"}, "want none or egress"},
		{[]string{"create", "--allow-host", "10.0.0.1"}, "is an IP address"},
		{[]string{"create", "--allow-host", "a*b.example"}, "must be a whole label"},
		{[]string{"create", "--allow-cidr", "2001:db8::1"}, "IPv6 is not supported"},
		{[]string{"create", "--allow-cidr", "1.2.3.4/40"}, "not an IPv4 address or CIDR block"},
		{[]string{"create", "--allow-cidr", "169.254.169.254"}, "never reachable"},
		{[]string{"create", "--allow-cidr", "127.0.0.0/8"}, "never reachable"},
		{[]string{"create", "--deny-cidr", "10.0.0.0/8", "--network", "none"}, "need --network egress"},
		{[]string{"net", "allow", "nosuchbox", "example.com"}, "not found"},
	}
	for _, c := range cases {
		_, stderr, code := d.run(c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
	id := strings.TrimSpace(d.must("create", "--image", "busybox"))
	if _, stderr, code := d.run("net", "allow", id, "example.com"); code == 0 || !strings.Contains(stderr, "mode none") {
		t.Errorf("net allow on a none sandbox: exit %d, %q", code, stderr)
	}
}
