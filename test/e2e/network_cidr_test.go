package e2e

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/testnet"
)

// pyTCP connects straight to host:port (no proxy) and prints what the
// server says first.
const pyTCP = `
import sys, socket
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print("GOT", s.recv(256).decode(errors="replace").strip())
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// pyUDP sends a datagram to host:port and prints the echo.
const pyUDP = `
import sys, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
try:
    s.sendto(b"ping", (sys.argv[1], int(sys.argv[2])))
    print("GOT", s.recvfrom(256)[0].decode())
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// greetIn serves TCP on addr in the test host ns, greeting each client
// with "hello from <addr>".
func greetIn(t *testing.T, ns, addr string) {
	t.Helper()
	ln := listenInNetns(t, ns, addr)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello from "+addr+"\n")
			c.Close()
		}
	}()
}

// TestNetworkAddressRules checks address (CIDR) rules on both firewall
// backends and both runtimes that join a prepared namespace (runc, and
// gVisor with --network=sandbox). Test hosts in namespaces the test makes
// stand for the internet: allowed reaches its greeter on a raw TCP
// connection, UDP and port 80 directly; denied lies inside the allow rule
// and under a deny rule; outside is permitted by the operator but no rule
// allows it; linkLocal is a link-local host the operator even permits,
// which no address rule may reach. The rules change at once, survive a
// kill -9 and restart, and leave nothing behind.
func TestNetworkAddressRules(t *testing.T) {
	t.Parallel()
	requireHost(t)
	requireGVisor(t)
	s := netSlot(t)
	allowed, denied, outside := newNetPlan(t, 4), newNetPlan(t, 5), newNetPlan(t, 6)
	netUpstream(t, allowed.NS, allowed.HostIf, allowed.HostCIDR, allowed.Upstream)
	for _, h := range []netPlan{denied, outside} {
		newTestHost(t, h.NS, h.HostIf, h.HostCIDR, h.Upstream)
	}
	llNS, llIf := fmt.Sprintf("pe2e-ll-%d", s), fmt.Sprintf("pe2ell-%d", s)
	llHost, ll := fmt.Sprintf("169.254.%d.1", 100+s), fmt.Sprintf("169.254.%d.2", 100+s)
	newTestHost(t, llNS, llIf, llHost+"/30", ll)
	for _, h := range []struct{ ns, addr string }{
		{allowed.NS, allowed.Upstream}, {denied.NS, denied.Upstream}, {outside.NS, outside.Upstream}, {llNS, ll},
	} {
		greetIn(t, h.ns, h.addr+":7000")
	}
	serveUDPEchoIn(t, nsPath(allowed.NS), allowed.Upstream+":7001")
	// Replies come back in by the test hosts' veths: the operator's part
	// (Paddock turns forwarding on only on its own veths).
	for _, ifname := range []string{allowed.HostIf, denied.HostIf, outside.HostIf, llIf} {
		setSysctl(t, "", "net/ipv4/conf/"+ifname+"/forwarding", "1")
	}
	// The control: from the host, every greeter answers, link-local too.
	for _, a := range []string{allowed.Upstream, denied.Upstream, outside.Upstream, ll} {
		if got := probeTCPGreeting(a + ":7000"); !strings.Contains(got, "hello from") {
			t.Fatalf("control: the host cannot reach %s: %s", a, got)
		}
	}
	// allowed and denied are the two /30s of one /29; outside is the next.
	block := netip29(t, allowed.Permit)
	for _, fw := range []string{"nftables", "iptables"} {
		t.Run(fw, func(t *testing.T) {
			if _, err := exec.LookPath(map[string]string{"nftables": "nft", "iptables": "iptables"}[fw]); err != nil {
				t.Skipf("needs %s", fw)
			}
			rng := allowed.Range
			if fw == "iptables" {
				rng = testnet.DaemonRange(t)
			}
			d := startDaemon(t, daemonOpts{listen: true, env: []string{
				"PADDOCK_FIREWALL=" + fw,
				"PADDOCK_NETWORK_RANGE=" + rng,
				"PADDOCK_EGRESS_PERMIT=" + strings.Join([]string{allowed.Permit, denied.Permit, outside.Permit, "169.254.0.0/16"}, ","),
				"PADDOCK_EGRESS_DNS_UPSTREAM=127.0.0.1:9",
			}})
			checkAddressRules(t, d, fw, block, denied.Permit, allowed.Upstream, denied.Upstream, outside.Upstream, ll)
		})
	}
}

// netip29 is the /29 holding the /30 p (test numbers 2k and 2k+1).
func netip29(t *testing.T, p string) string {
	t.Helper()
	_, n, err := net.ParseCIDR(p)
	if err != nil {
		t.Fatal(err)
	}
	n.Mask = net.CIDRMask(29, 32)
	n.IP = n.IP.Mask(n.Mask)
	return n.String()
}

func probeTCPGreeting(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 3e9)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	b := make([]byte, 256)
	n, err := c.Read(b)
	if err != nil {
		return "ERR " + err.Error()
	}
	return string(b[:n])
}

func checkAddressRules(t *testing.T, d *daemon, fw, block, deny, up, denied, outside, ll string) {
	boxes := createNetBoxes(t, d, "--allow-cidr", block, "--deny-cidr", deny)
	py := func(b *netBox, script string, args ...string) string {
		t.Helper()
		return b.py(t, d, script, args...)
	}
	_, apiPort, _ := net.SplitHostPort(d.listen)
	// A drop, not a refusal: nothing answers, so the connection times out.
	const dropped = "ERR TimeoutError"
	greeting := func(a string) string { return "GOT hello from " + a + ":7000" }
	check := func(t *testing.T, b *netBox, script string, args []string, want string) {
		t.Helper()
		if got := py(b, script, args...); !strings.Contains(got, want) {
			t.Errorf("%s %v: got %q, want %q", b.runtime, args, got, want)
		}
	}
	for _, b := range boxes {
		t.Run(b.runtime, func(t *testing.T) {
			check(t, b, pyTCP, []string{up, "7000"}, greeting(up))
			check(t, b, pyUDP, []string{up, "7001"}, "GOT ping")
			// Port 80 of an allowed address is reached as addressed, not
			// through the transparent proxy; through the proxy variables
			// the proxy lets the address through too.
			check(t, b, pyRaw, []string{up, "80", "anything.test"}, "upstream says hello to anything.test")
			check(t, b, pyGet, []string{"http://" + up + "/"}, "200 upstream says hello to "+up)
			check(t, b, pyTCP, []string{denied, "7000"}, dropped)
			check(t, b, pyGet, []string{"http://" + denied + ":7000/"}, "refused by rule deny-cidr:"+deny)
			check(t, b, pyTCP, []string{outside, "7000"}, dropped)
			check(t, b, pyGet, []string{"http://" + outside + ":7000/"}, "refused by rule direct-ip")
		})
	}

	t.Run("0.0.0.0/0 still keeps out what no rule opens", func(t *testing.T) {
		for i, b := range boxes {
			d.must("net", "allow", b.id, "0.0.0.0/0")
			other := boxes[1-i]
			check(t, b, pyTCP, []string{outside, "7000"}, greeting(outside))
			check(t, b, pyTCP, []string{denied, "7000"}, dropped)
			check(t, b, pyTCP, []string{ll, "7000"}, dropped)
			check(t, b, pyTCP, []string{b.gw, apiPort}, dropped)
			check(t, b, pyTCP, []string{b.gw, "22"}, dropped)
			check(t, b, pyTCP, []string{other.gw, "3128"}, dropped)
			check(t, b, pyTCP, []string{netAddrOf(t, d, other.id), "22"}, dropped)
		}
	})

	t.Run("rule change at once", func(t *testing.T) {
		b := boxes[0]
		d.must("net", "deny", b.id, outside)
		check(t, b, pyTCP, []string{outside, "7000"}, dropped)
		d.must("net", "allow", b.id, outside)
		check(t, b, pyTCP, []string{outside, "7000"}, greeting(outside))
		if l := d.must("ledger", b.id, "--json"); !strings.Contains(l, `"allow_cidrs"`) || !strings.Contains(l, outside+"/32") {
			t.Errorf("ledger lacks the address rules: %s", l)
		}
	})

	t.Run("kill -9 and restart keep rules, destroy leaves nothing", func(t *testing.T) {
		d.kill9()
		d.start()
		for _, b := range boxes {
			check(t, b, pyTCP, []string{up, "7000"}, greeting(up))
			check(t, b, pyTCP, []string{outside, "7000"}, greeting(outside))
			check(t, b, pyTCP, []string{denied, "7000"}, dropped)
			check(t, b, pyTCP, []string{ll, "7000"}, dropped)
		}
		links := map[string]netLink{}
		tag := d.netTag()
		// With iptables a sandbox's address rules are a chain of its own
		// (PADDOCK-DIR-<index>-<tag>, in filter and nat).
		directChain := func(id string) string {
			return "PADDOCK-DIR-" + strings.TrimPrefix(links[id].HostIf, "pd"+tag) + "-" + tag
		}
		for _, b := range boxes {
			links[b.id] = readNetLink(t, d, b.id)
			if out, _ := exec.Command("iptables-save").CombinedOutput(); fw == "iptables" && !strings.Contains(string(out), ":"+directChain(b.id)+" ") {
				t.Errorf("%s: no chain %s before destroy:\n%s", b.runtime, directChain(b.id), out)
			}
			d.must("rm", b.id)
		}
		for _, b := range boxes {
			if l := leftovers(b.id, tag); len(l) > 0 {
				t.Errorf("%s: left after destroy: %v", b.runtime, l)
			}
			if out, _ := exec.Command("iptables-save").CombinedOutput(); strings.Contains(string(out), directChain(b.id)) {
				t.Errorf("%s: chain %s left after destroy:\n%s", b.runtime, directChain(b.id), out)
			}
			if _, err := exec.Command("ip", "link", "show", links[b.id].HostIf).CombinedOutput(); err == nil {
				t.Errorf("%s: veth %s left", b.runtime, links[b.id].HostIf)
			}
		}
	})
}

// netAddrOf is a sandbox's own address (the other end of its /30).
func netAddrOf(t *testing.T, d *daemon, id string) string {
	t.Helper()
	return readNetLink(t, d, id).Addr
}
