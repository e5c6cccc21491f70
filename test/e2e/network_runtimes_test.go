package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// pyGetNoProxy fetches a URL ignoring the proxy variables, as programs
// that do not know them do: name lookup, then a direct connection.
const pyGetNoProxy = `
import sys, urllib.request, urllib.error
try:
    r = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(sys.argv[1], timeout=20)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// pyRawSockets tries to open a raw IP and a packet socket.
const pyRawSockets = `
import socket
for fam, typ in ((socket.AF_INET, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):
    try:
        socket.socket(fam, typ, 1 if fam == socket.AF_INET else 0)
        print("OPENED", fam)
    except Exception as e:
        print("ERR", e)
`

// pyNoV6 binds an IPv6 socket to ::1: that works wherever the sandbox's
// stack has IPv6 at all (the namespace's with IPv6 on, or a gVisor
// netstack with its own), so a refusal shows it has none.
const pyNoV6 = `
import socket
try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.bind(("::1", 0))
    print("BOUND", s.getsockname())
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// netBox is one sandbox of a network test that runs on every runtime,
// with the address of its gateway.
type netBox struct{ runtime, id, gw string }

// createNetBoxes creates a sandbox on runc and one on gVisor with the given
// create flags, and reads each one's gateway from its proxy variable.
func createNetBoxes(t *testing.T, d *daemon, flags ...string) []*netBox {
	t.Helper()
	boxes := []*netBox{{runtime: "runc"}, {runtime: "gvisor"}}
	for _, b := range boxes {
		b.id = strings.TrimSpace(d.must(append([]string{"create", "--runtime", b.runtime}, flags...)...))
	}
	for _, b := range boxes {
		b.gw = b.py(t, d, `import os; print(os.environ["HTTP_PROXY"].split("//")[1].split(":")[0])`)
		if net.ParseIP(b.gw) == nil {
			t.Fatalf("%s: gateway %q", b.runtime, b.gw)
		}
	}
	return boxes
}

// py runs a Python script in the sandbox and returns what it printed on
// both streams, trimmed.
func (b *netBox) py(t *testing.T, d *daemon, script string, args ...string) string {
	t.Helper()
	out, errOut, _ := d.run(append([]string{"exec", b.id, "--", "python3", "-c", script}, args...)...)
	return strings.TrimSpace(out + errOut)
}

// TestNetworkEgressRuntimes runs the egress guarantees on every runtime
// that can join a prepared namespace here (runc, and gVisor with
// --network=sandbox), with one sandbox of each side by side in one daemon:
// each is also the other's neighbour whose gateway must stay unreachable.
// It ends with a daemon kill -9 and restart (the reconcile path).
func TestNetworkEgressRuntimes(t *testing.T) {
	t.Parallel()
	requireHost(t)
	requireGVisor(t)
	// The default backend: nftables where nft works, else iptables.
	_, nftErr := exec.LookPath("nft")
	_, iptErr := exec.LookPath("iptables")
	if nftErr != nil && iptErr != nil {
		t.Skip("needs nft or iptables")
	}
	plan := newNetPlan(t, 1)
	up := plan.Upstream
	netUpstream(t, plan.NS, plan.HostIf, plan.HostCIDR, up)
	d := startDaemon(t, daemonOpts{listen: true, env: []string{
		"PADDOCK_NETWORK_RANGE=" + plan.Range,
		fmt.Sprintf("PADDOCK_EGRESS_DNS_STATIC=up.test=%s;other.test=%s;x.evil.test=%s", up, up, up),
		"PADDOCK_EGRESS_PERMIT=" + plan.Permit,
		// Nothing listens there: no lookup may leave this machine.
		"PADDOCK_EGRESS_DNS_UPSTREAM=127.0.0.1:9",
	}})

	boxes := createNetBoxes(t, d, "--allow-host", "up.test", "--deny-host", "*.evil.test")
	py := func(b *netBox, script string, args ...string) string {
		t.Helper()
		return b.py(t, d, script, args...)
	}
	_, apiPort, _ := net.SplitHostPort(d.listen)

	// The firewall drops what it refuses: a refused connection, as from
	// a port nobody listens on, would not show that the firewall holds.
	const dropped = "TimeoutError"
	for i, b := range boxes {
		other := boxes[1-i]
		cases := []struct {
			name   string
			script string
			args   []string
			want   string
		}{
			{"allowed host through the proxy env", pyGet, []string{"http://up.test/"}, "200 upstream says hello to up.test"},
			{"denied host refused with the rule", pyGet, []string{"http://x.evil.test/"}, "403 paddock egress: x.evil.test:80 refused by rule deny:*.evil.test"},
			{"unlisted host refused", pyGet, []string{"http://other.test/"}, "refused by rule default-deny"},
			{"direct IP refused", pyRaw, []string{up, "80", up}, "refused by rule direct-ip"},
			{"direct IP with an allowed Host is governed", pyRaw, []string{up, "80", "up.test"}, "upstream says hello to up.test"},
			{"metadata address refused", pyRaw, []string{"169.254.169.254", "80", "169.254.169.254"}, "refused by rule direct-ip"},
			{"gateway's API port unreachable", pyRaw, []string{b.gw, apiPort, "x"}, dropped},
			{"gateway's port 22 unreachable", pyRaw, []string{b.gw, "22", "x"}, dropped},
			{"neighbour's gateway proxy unreachable", pyRaw, []string{other.gw, "3128", "up.test"}, dropped},
			{"upstream other port unreachable", pyRaw, []string{up, "22", "x"}, dropped},
			{"no IPv6 in its stack", pyNoV6, nil, "ERR"},
			{"allowed name resolves", pyResolve, []string{"up.test"}, up},
			{"denied name does not resolve", pyResolve, []string{"x.evil.test"}, "ERR"},
		}
		for _, c := range cases {
			t.Run(b.runtime+"/"+c.name, func(t *testing.T) {
				if got := py(b, c.script, c.args...); !strings.Contains(got, c.want) {
					t.Fatalf("got %q, want %q", got, c.want)
				}
			})
		}
		t.Run(b.runtime+"/IPv6 off on both ends", func(t *testing.T) { checkIPv6Off(t, readNetLink(t, d, b.id)) })
		t.Run(b.runtime+"/transparent without the proxy env", func(t *testing.T) {
			if got := py(b, pyGetNoProxy, "http://up.test/"); !strings.Contains(got, "200 upstream says hello to up.test") {
				t.Fatalf("urllib without a proxy: %q", got)
			}
			// curl resolves names in a thread: under gVisor this also
			// shows that threads start (runsc_seccomp.go).
			out, errOut, _ := d.run("exec", b.id, "--", "curl", "-sS", "--max-time", "20", "--noproxy", "*", "http://up.test/")
			if !strings.Contains(out, "upstream says hello to up.test") {
				t.Fatalf("curl --noproxy: %q %q", out, errOut)
			}
		})
		if b.runtime == "gvisor" {
			t.Run("gvisor/no raw or packet sockets", func(t *testing.T) {
				// runsc runs without --net-raw: a raw socket could
				// write any packet onto the veth.
				if got := py(b, pyRawSockets); strings.Contains(got, "OPENED") || strings.Count(got, "ERR") != 2 {
					t.Fatalf("got %q, want two refusals", got)
				}
			})
		}
		t.Run(b.runtime+"/pause and resume", func(t *testing.T) {
			d.must("pause", b.id)
			d.must("resume", b.id)
			if got := py(b, pyGet, "http://up.test/"); !strings.Contains(got, "200 upstream says hello") {
				t.Fatalf("after resume: %q", got)
			}
		})
		t.Run(b.runtime+"/stop and start", func(t *testing.T) {
			// A new container in the same namespace: runsc is created
			// with --network=sandbox again and its later commands match.
			d.must("stop", b.id)
			d.must("start", b.id)
			if got := py(b, pyGet, "http://up.test/"); !strings.Contains(got, "200 upstream says hello") {
				t.Fatalf("after restart: %q", got)
			}
		})
		t.Run(b.runtime+"/rule change at once", func(t *testing.T) {
			d.must("net", "allow", b.id, "other.test")
			if got := py(b, pyGet, "http://other.test/"); !strings.Contains(got, "200 upstream says hello") {
				t.Fatalf("after allow: %q", got)
			}
			d.must("net", "deny", b.id, "other.test")
			if got := py(b, pyGet, "http://other.test/"); !strings.Contains(got, "refused by rule deny:other.test") {
				t.Fatalf("after deny: %q", got)
			}
		})
	}

	t.Run("kill -9 and restart keep rules, destroy leaves nothing", func(t *testing.T) {
		d.kill9()
		d.start()
		for _, b := range boxes {
			if got := py(b, pyGet, "http://up.test/"); !strings.Contains(got, "200 upstream says hello") {
				t.Fatalf("%s after restart: %q", b.runtime, got)
			}
			if got := py(b, pyGet, "http://other.test/"); !strings.Contains(got, "deny:other.test") {
				t.Fatalf("%s after restart, rules lost: %q", b.runtime, got)
			}
		}
		for _, b := range boxes {
			d.must("rm", b.id)
		}
		for _, b := range boxes {
			if l := leftovers(b.id, d.netTag()); len(l) > 0 {
				t.Fatalf("%s: left after destroy: %v", b.runtime, l)
			}
		}
	})
}
