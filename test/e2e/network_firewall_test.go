package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// dropWait is how long a probe waits before it calls a packet dropped.
const dropWait = 1500 * time.Millisecond

// checkIPv6Off reads disable_ipv6 on both ends of a sandbox's veth.
func checkIPv6Off(t *testing.T, l netLink) {
	t.Helper()
	if v := readSysctl(t, "", "net/ipv6/conf/"+l.HostIf+"/disable_ipv6"); v != "1" {
		t.Errorf("host end %s: disable_ipv6 = %s", l.HostIf, v)
	}
	for _, ifname := range []string{"eth0", "all", "default"} {
		if v := readSysctl(t, l.NetNS, "net/ipv6/conf/"+ifname+"/disable_ipv6"); v != "1" {
			t.Errorf("sandbox namespace %s: disable_ipv6 = %s", ifname, v)
		}
	}
}

// checkFirewallPackets sends packets the firewall must drop from a
// sandbox's namespace, and from outside it to its gateway, each beside a
// control that shows the same probe getting through where nothing of
// Paddock's is in the way: a namespace of the test's own (ctrl) with a
// veth to the host that is not one of Paddock's. Forwarding is turned on
// for the interfaces involved (only those), so that what the firewall's
// forward drops stop would otherwise really be forwarded. n is the
// plan's test number; newBox makes a neighbour sandbox.
func checkFirewallPackets(t *testing.T, d *daemon, plan netPlan, n int, id string, newBox func() string) {
	a := readNetLink(t, d, id)
	other := newBox()
	t.Cleanup(func() { d.run("rm", other) })
	b := readNetLink(t, d, other)

	ctrl := newNetPlan(t, 32+n)
	newTestHost(t, ctrl.NS, ctrl.HostIf, ctrl.HostCIDR, ctrl.Upstream)
	ctrlNS := nsPath(ctrl.NS)
	ctrlHost := strings.Split(ctrl.HostCIDR, "/")[0]
	upHost := strings.Split(plan.HostCIDR, "/")[0]
	ipRun(t, "-n", ctrl.NS, "route", "add", "default", "via", ctrlHost)
	// The upstream answers the control and the sandboxes through the host.
	for _, dst := range []string{plan.Range, ctrl.Permit} {
		ipRun(t, "-n", plan.NS, "route", "add", dst, "via", upHost)
		t.Cleanup(func() { _ = ipDel(plan.NS, dst, upHost) })
	}
	for _, ifname := range []string{a.HostIf, b.HostIf, plan.HostIf, ctrl.HostIf} {
		setSysctl(t, "", "net/ipv4/conf/"+ifname+"/forwarding", "1")
	}

	// Listeners: on the control's host side, on the sandbox's gateway
	// (a host service bound there), in the upstream and in the neighbour.
	ctrlTCP := serveTCPIn(t, "", "tcp", ctrlHost+":0")
	ctrlUDP := serveUDPEchoIn(t, "", ctrlHost+":0")
	gwUDP := serveUDPEchoIn(t, "", a.Gateway+":0")
	upUDP := serveUDPEchoIn(t, nsPath(plan.NS), plan.Upstream+":0")
	nbTCP := serveTCPIn(t, b.NetNS, "tcp", b.Addr+":0")
	nbUDP := serveUDPEchoIn(t, b.NetNS, b.Addr+":0")
	proxy := net.JoinHostPort(a.Gateway, "3128")

	// IPv6 as if disable_ipv6 had not taken, on the control's veth and on
	// the sandbox's; a ULA prefix of this run and test.
	s := netSlot(t)
	ctrlULA, ctrlLL := openIPv6(t, ctrlNS, ctrl.HostIf, fmt.Sprintf("fd70:%x:%x::", s, 2*n))
	boxULA, boxLL := openIPv6(t, a.NetNS, a.HostIf, fmt.Sprintf("fd70:%x:%x::", s, 2*n+1))
	v6Listen := func(ula, hostIf string) (string, string) {
		u := serveTCPIn(t, "", "tcp6", "["+ula+"]:0")
		l := serveTCPIn(t, "", "tcp6", "[fe80::1%"+hostIf+"]:0")
		_, up, _ := net.SplitHostPort(u)
		_, lp, _ := net.SplitHostPort(l)
		return up, lp
	}
	ctrlULAPort, ctrlLLPort := v6Listen(ctrlULA, ctrl.HostIf)
	boxULAPort, boxLLPort := v6Listen(boxULA, a.HostIf)
	llAddr := func(ll, port string) string {
		host, zone, _ := strings.Cut(ll, "%")
		return net.JoinHostPort(host+"%"+zone, port)
	}

	portOf := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	cases := []struct {
		name, want string
		probe      func() string
	}{
		// Controls: each probe can see a packet through.
		{"control TCP to its host", "answered", func() string { return probeTCP(ctrlNS, "tcp", ctrlTCP, dropWait) }},
		{"control UDP to its host", "answered", func() string { return probeUDP(ctrlNS, ctrlUDP, dropWait) }},
		{"control ICMP to its host", "answered", func() string { return probePing(ctrlNS, ctrlHost, dropWait) }},
		{"control ICMP forwarded to the upstream", "answered", func() string { return probePing(ctrlNS, plan.Upstream, dropWait) }},
		{"control UDP forwarded to the upstream", "answered", func() string { return probeUDP(ctrlNS, upUDP, dropWait) }},
		{"control IPv6 TCP to its host's ULA", "answered", func() string {
			return probeTCP(ctrlNS, "tcp6", net.JoinHostPort(ctrlULA, ctrlULAPort), dropWait)
		}},
		{"control IPv6 TCP to its host's link-local", "answered", func() string {
			return probeTCP(ctrlNS, "tcp6", llAddr(ctrlLL, ctrlLLPort), dropWait)
		}},
		{"sandbox TCP to its proxy", "answered", func() string { return probeTCP(a.NetNS, "tcp", proxy, dropWait) }},

		// What the firewall drops from the sandbox.
		{"sandbox UDP to the gateway, not DNS", "timeout", func() string { return probeUDP(a.NetNS, gwUDP, dropWait) }},
		{"sandbox UDP to the upstream", "timeout", func() string { return probeUDP(a.NetNS, upUDP, dropWait) }},
		{"sandbox ICMP to the gateway", "timeout", func() string { return probePing(a.NetNS, a.Gateway, dropWait) }},
		{"sandbox ICMP to the upstream", "timeout", func() string { return probePing(a.NetNS, plan.Upstream, dropWait) }},
		{"sandbox ICMP to the neighbour", "timeout", func() string { return probePing(a.NetNS, b.Addr, dropWait) }},
		{"sandbox TCP to the neighbour's address", "timeout", func() string { return probeTCP(a.NetNS, "tcp", nbTCP, dropWait) }},
		{"sandbox UDP to the neighbour's address", "timeout", func() string { return probeUDP(a.NetNS, nbUDP, dropWait) }},
		{"sandbox TCP to the neighbour's proxy", "timeout", func() string {
			return probeTCP(a.NetNS, "tcp", net.JoinHostPort(b.Gateway, "3128"), dropWait)
		}},
		{"sandbox IPv6 TCP to the host end's ULA", "timeout", func() string {
			return probeTCP(a.NetNS, "tcp6", net.JoinHostPort(boxULA, boxULAPort), dropWait)
		}},
		{"sandbox IPv6 TCP to the host end's link-local", "timeout", func() string {
			return probeTCP(a.NetNS, "tcp6", llAddr(boxLL, boxLLPort), dropWait)
		}},

		// Nobody but the sandbox reaches its gateway's listeners: not the
		// host (over lo), not a namespace that routes the range here.
		{"host to the sandbox's proxy", "timeout", func() string { return probeTCP("", "tcp", proxy, dropWait) }},
		{"host to the sandbox's DNS over TCP", "timeout", func() string {
			return probeTCP("", "tcp", net.JoinHostPort(a.Gateway, "53"), dropWait)
		}},
		{"routed namespace to the sandbox's proxy", "timeout", func() string { return probeTCP(ctrlNS, "tcp", proxy, dropWait) }},
		{"routed namespace to the sandbox's transparent proxy", "timeout", func() string {
			return probeTCP(ctrlNS, "tcp", net.JoinHostPort(a.Gateway, "3129"), dropWait)
		}},
		{"routed namespace to the sandbox's address", "timeout", func() string {
			return probeTCP(ctrlNS, "tcp", net.JoinHostPort(b.Addr, portOf(nbTCP)), dropWait)
		}},
		// And after all that the sandbox still has its proxy.
		{"sandbox TCP to its proxy, still", "answered", func() string { return probeTCP(a.NetNS, "tcp", proxy, dropWait) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.probe(); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func ipDel(ns, dst, via string) error {
	return exec.Command("ip", "-n", ns, "route", "del", dst, "via", via).Run()
}

// checkRestartWindow probes, from a sandbox's namespace and without a
// pause, a host service on its gateway and the daemon's TCP API port on
// it while restart runs: no probe may get through or be refused (a
// refusal means the host's stack saw the packet) at any instant. It waits
// until the sandbox's proxy answers again, so the daemon's rebuild of the
// rules is inside the window.
func checkRestartWindow(t *testing.T, d *daemon, id, apiPort string, restart func()) {
	l := readNetLink(t, d, id)
	targets := []string{serveTCPIn(t, "", "tcp", l.Gateway+":0")}
	if apiPort != "" {
		targets = append(targets, net.JoinHostPort(l.Gateway, apiPort))
	}
	stop := make(chan struct{})
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		wg    sync.WaitGroup
		first = map[string]string{}
	)
	for _, target := range targets {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = inNetnsDo(l.NetNS, func() error {
					for {
						select {
						case <-stop:
							return nil
						default:
						}
						c, err := net.DialTimeout("tcp", target, 100*time.Millisecond)
						if err == nil {
							c.Close()
						}
						o := outcome(err)
						mu.Lock()
						seen[o]++
						if o != "timeout" && first[o] == "" {
							first[o] = fmt.Sprintf("%s at %s", target, time.Now().Format("15:04:05.000"))
						}
						mu.Unlock()
					}
				})
			}()
		}
	}
	start := time.Now()
	restart()
	proxy := net.JoinHostPort(l.Gateway, "3128")
	for probeTCP(l.NetNS, "tcp", proxy, time.Second) != "answered" {
		if time.Since(start) > time.Minute {
			close(stop)
			wg.Wait()
			t.Fatalf("the sandbox's proxy did not come back after the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("probes over %s: %v", time.Since(start).Round(time.Millisecond), seen)
	for o, n := range seen {
		if o != "timeout" {
			t.Errorf("%d probes %s during the restart (first: %s)", n, o, first[o])
		}
	}
	if seen["timeout"] < 20 {
		t.Errorf("only %d probes ran", seen["timeout"])
	}
}
