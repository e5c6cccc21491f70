package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// pyConnect only connects: it tells a dropped packet (timed out) from a
// refusal or an answer.
const pyConnect = `
import sys, socket
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=4).close()
    print("CONNECTED")
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// pyDNS asks the given server for an A record over UDP, without the
// system resolver (so the server named is the one asked).
const pyDNS = `
import sys, socket, struct
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
for l in sys.argv[2].split("."):
    q += bytes([len(l)]) + l.encode()
q += b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(6)
try:
    s.sendto(q, (sys.argv[1], 53))
    r = s.recv(512)
    an = struct.unpack(">H", r[6:8])[0]
    print("RCODE", r[3] & 15, "AN", an, ".".join(str(b) for b in r[-4:]) if an else "-")
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// nftState is what nftables holds of a daemon's tag and sandboxes.
func nftState(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	return string(out)
}

// TestNetworkNftables runs the reachability matrix with the nftables
// backend and checks it leaves nothing behind, also after a SIGKILL.
func TestNetworkNftables(t *testing.T) {
	t.Parallel()
	if err := exec.Command("nft", "list", "tables").Run(); err != nil {
		t.Skip("needs a working nft (Debian package nftables)")
	}
	plan := newNetPlan(t, 2)
	up := plan.Upstream
	netUpstream(t, plan.NS, plan.HostIf, plan.HostCIDR, up)
	d := startDaemon(t, daemonOpts{listen: true, env: []string{
		"PADDOCK_FIREWALL=nftables",
		"PADDOCK_NETWORK_RANGE=" + plan.Range,
		fmt.Sprintf("PADDOCK_EGRESS_DNS_STATIC=up.test=%s;x.evil.test=%s", up, up),
		"PADDOCK_EGRESS_PERMIT=" + plan.Permit,
		"PADDOCK_EGRESS_DNS_UPSTREAM=127.0.0.1:9",
	}})
	table := "paddock_" + d.netTag()
	if !strings.Contains(d.logs.String(), "backend=nftables") {
		t.Fatalf("daemon log does not name the nftables backend:\n%s", d.logs.String())
	}
	create := func() string {
		return strings.TrimSpace(d.must("create", "--allow-host", "up.test", "--deny-host", "*.evil.test"))
	}
	id, other := create(), create()
	py := func(box, script string, args ...string) string {
		t.Helper()
		out, _, _ := d.run(append([]string{"exec", box, "--", "python3", "-c", script}, args...)...)
		return strings.TrimSpace(out)
	}
	gwOf := func(box string) string {
		return py(box, `import os; print(os.environ["HTTP_PROXY"].split("//")[1].split(":")[0])`)
	}
	gw, otherGW := gwOf(id), gwOf(other)
	if net.ParseIP(gw) == nil || net.ParseIP(otherGW) == nil || gw == otherGW {
		t.Fatalf("gateways %q and %q", gw, otherGW)
	}
	if st := nftState(t); !strings.Contains(st, "table inet "+table) || !strings.Contains(st, "paddock:"+id) || !strings.Contains(st, "paddock:"+other) {
		t.Fatalf("nft table or elements missing:\n%s", st)
	}

	cases := []struct {
		name   string
		script string
		args   []string
		want   string
	}{
		{"allowed host reachable", pyGet, []string{"http://up.test/"}, "200 upstream says hello to up.test"},
		{"denied host refused", pyGet, []string{"http://x.evil.test/"}, "refused by rule deny:*.evil.test"},
		{"direct IP refused", pyRaw, []string{up, "80", up}, "refused by rule direct-ip"},
		// Transparent interception: a direct connection to any address on
		// 80 or 443 lands on the proxy (nothing routes to TEST-NET-3).
		{"direct 80 intercepted", pyRaw, []string{up, "80", "up.test"}, "upstream says hello to up.test"},
		{"direct 443 intercepted", pyConnect, []string{"203.0.113.9", "443"}, "CONNECTED"},
		{"proxy port open", pyConnect, []string{gw, "3128"}, "CONNECTED"},
		// Dropped, not refused: nothing on the host answers.
		{"gateway port 22 dropped", pyConnect, []string{gw, "22"}, "timed out"},
		{"gateway port 8080 dropped", pyConnect, []string{gw, "8080"}, "timed out"},
		{"other sandbox's gateway dropped", pyConnect, []string{otherGW, "3128"}, "timed out"},
		{"upstream direct port 22 dropped", pyConnect, []string{up, "22"}, "timed out"},
		{"denied name does not resolve", pyResolve, []string{"x.evil.test"}, "ERR"},
		// Any DNS server named is answered by Paddock's resolver.
		{"DNS to another server redirected", pyDNS, []string{"203.0.113.53", "up.test"}, "RCODE 0 AN 1 " + up},
		{"DNS of a denied name via another server", pyDNS, []string{"203.0.113.53", "x.evil.test"}, "AN 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := py(id, c.script, c.args...); !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}

	t.Run("info names the firewall", func(t *testing.T) {
		var in struct{ Firewall string }
		if err := json.Unmarshal([]byte(d.must("info", "--json")), &in); err != nil || in.Firewall != "nftables" {
			t.Fatalf("info firewall %q, %v", in.Firewall, err)
		}
	})
	t.Run("IPv6 off on both ends", func(t *testing.T) { checkIPv6Off(t, readNetLink(t, d, id)) })
	t.Run("packets the firewall drops", func(t *testing.T) {
		checkFirewallPackets(t, d, plan, 2, id, create)
	})
	t.Run("no fall-through during a restart", func(t *testing.T) {
		_, apiPort, _ := net.SplitHostPort(d.listen)
		checkRestartWindow(t, d, id, apiPort, func() { d.kill9(); d.start() })
	})

	t.Run("delete leaves no element", func(t *testing.T) {
		d.must("rm", other)
		st := nftState(t)
		if strings.Contains(st, "paddock:"+other) {
			t.Fatalf("elements of %s left:\n%s", other, st)
		}
		if !strings.Contains(st, "paddock:"+id) {
			t.Fatalf("elements of %s lost:\n%s", id, st)
		}
	})

	t.Run("kill -9 and restart rebuild, stop removes the table", func(t *testing.T) {
		d.kill9()
		d.start()
		if got := py(id, pyGet, "http://up.test/"); !strings.Contains(got, "200 upstream says hello") {
			t.Fatalf("after restart: %q", got)
		}
		if got := py(id, pyConnect, gw, "22"); !strings.Contains(got, "timed out") {
			t.Fatalf("after restart, gateway port 22: %q", got)
		}
		if st := nftState(t); strings.Count(st, "table inet "+table) != 1 || strings.Count(st, "paddock:"+id) != 5 {
			t.Fatalf("after restart, want one table with %s's 5 elements:\n%s", id, st)
		}
		d.must("rm", id)
		d.stop()
		if st := nftState(t); strings.Contains(st, table) {
			t.Fatalf("table left after the last sandbox and the daemon went:\n%s", st)
		}
		for _, box := range []string{id, other} {
			if l := leftovers(box, d.netTag()); len(l) > 0 {
				t.Fatalf("left after destroy: %v", l)
			}
		}
		d.start() // for the cleanup
	})
}
