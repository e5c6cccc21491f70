package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/testdaemon"
	"github.com/paddock-dev/paddock/internal/testnet"
	"golang.org/x/sys/unix"
)

// Probes that send packets from inside a network namespace (a sandbox's
// or one the test made) from the test process itself: a thread joins the
// namespace, so the packets leave through its interfaces and meet the
// host's firewall exactly as a runc sandbox's own would. Each tells a
// drop (nothing comes back: "timeout") from a refusal (some stack saw the
// packet) and from an answer.

// inNetnsDo runs fn on a thread that joined the network namespace at
// path; "" runs it where the test runs. The thread is never unlocked, so
// it ends with its goroutine and nothing else runs in the namespace.
func inNetnsDo(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func nsPath(name string) string { return "/run/netns/" + name }

// outcome names what a probe saw.
func outcome(err error) string { return testnet.Outcome(err) }

// probeTCP connects to addr from namespace ns ("answered" = connected).
func probeTCP(ns, network, addr string, timeout time.Duration) string {
	return testnet.ProbeTCP(ns, network, addr, timeout)
}

// probeUDP sends a datagram to addr from namespace ns and waits for the
// echo.
func probeUDP(ns, addr string, timeout time.Duration) string {
	var res string
	err := inNetnsDo(ns, func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			res = outcome(err)
			return nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write([]byte("paddock probe")); err != nil {
			res = outcome(err)
			return nil
		}
		buf := make([]byte, 64)
		_, err = c.Read(buf)
		res = outcome(err)
		return nil
	})
	if err != nil {
		return "error: " + err.Error()
	}
	return res
}

// probePing sends one ICMP echo request to dst from namespace ns.
func probePing(ns, dst string, timeout time.Duration) string {
	var res string
	err := inNetnsDo(ns, func() error {
		c, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
		if err != nil {
			return err
		}
		defer c.Close()
		id := uint16(rand.Uint32())
		msg := []byte{8, 0, 0, 0, byte(id >> 8), byte(id), 0, 1, 'p', 'd'}
		sum := icmpChecksum(msg)
		msg[2], msg[3] = byte(sum>>8), byte(sum)
		if _, err := c.WriteTo(msg, &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
			res = outcome(err)
			return nil
		}
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf) // the IPv4 header is stripped
			if err != nil {
				res = outcome(err)
				return nil
			}
			if from.String() == dst && n >= 8 && buf[0] == 0 && buf[4] == byte(id>>8) && buf[5] == byte(id) {
				res = "answered"
				return nil
			}
			if n >= 8 && buf[0] == 3 { // destination unreachable
				res = "unreachable"
				return nil
			}
		}
	})
	if err != nil {
		return "error: " + err.Error()
	}
	return res
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// serveTCPIn listens on addr in namespace ns, accepting and closing
// connections; it returns the address with the port the kernel chose.
func serveTCPIn(t *testing.T, ns, network, addr string) string {
	t.Helper()
	var ln net.Listener
	if err := inNetnsDo(ns, func() (err error) { ln, err = net.Listen(network, addr); return err }); err != nil {
		t.Fatalf("listen %s in %q: %v", addr, ns, err)
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
	return ln.Addr().String()
}

// serveUDPEchoIn echoes datagrams on addr in namespace ns.
func serveUDPEchoIn(t *testing.T, ns, addr string) string {
	t.Helper()
	var pc net.PacketConn
	if err := inNetnsDo(ns, func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatalf("listen udp %s in %q: %v", addr, ns, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	return pc.LocalAddr().String()
}

// readSysctl reads a /proc/sys file as namespace ns ("" = the host) sees it.
func readSysctl(t *testing.T, ns, path string) string {
	t.Helper()
	var v string
	if err := inNetnsDo(ns, func() error {
		b, err := os.ReadFile(filepath.Join("/proc/sys", path))
		v = strings.TrimSpace(string(b))
		return err
	}); err != nil {
		t.Fatalf("read %s in %q: %v", path, ns, err)
	}
	return v
}

// setSysctl writes a /proc/sys file in namespace ns and puts the old value
// back when the test ends (if the file still exists then).
func setSysctl(t *testing.T, ns, path, value string) {
	t.Helper()
	old := readSysctl(t, ns, path)
	write := func(v string) error {
		return inNetnsDo(ns, func() error { return os.WriteFile(filepath.Join("/proc/sys", path), []byte(v), 0o644) })
	}
	if err := write(value); err != nil {
		t.Fatalf("write %s=%s in %q: %v", path, value, ns, err)
	}
	t.Cleanup(func() { _ = write(old) })
}

// ipRun runs ip(8) and fails the test if it fails.
func ipRun(t *testing.T, args ...string) { t.Helper(); testnet.IPRun(t, args...) }

// netLink is a sandbox's plumbing as the daemon records it.
type netLink = testdaemon.NetLink

func readNetLink(t *testing.T, d *daemon, id string) netLink {
	t.Helper()
	return testdaemon.ReadNetLink(t, d.stateDir, id)
}

// openIPv6 gives a veth pair (hostIf in the host's namespace, eth0 in
// ns) IPv6 as a host where disable_ipv6 did not take would have it: a
// ULA address in prefix (like "fd70:1:2::") and a link-local address on
// each end, with static neighbour entries so no neighbour discovery is
// needed for a packet to leave. It returns the host end's two addresses
// as a client in ns dials them (the link-local one with eth0's index as
// its zone: Go maps zone names through the test process's own namespace).
// Undone when the test ends.
func openIPv6(t *testing.T, ns, hostIf, prefix string) (ula, linkLocal string) {
	t.Helper()
	for _, c := range []struct{ ns, ifname string }{{"", hostIf}, {ns, "eth0"}} {
		setSysctl(t, c.ns, "net/ipv6/conf/"+c.ifname+"/accept_dad", "0")
		setSysctl(t, c.ns, "net/ipv6/conf/"+c.ifname+"/disable_ipv6", "0")
	}
	hostMAC, _ := ifaceMAC(t, "", hostIf)
	nsMAC, nsIndex := ifaceMAC(t, ns, "eth0")
	nsName := filepath.Base(ns)
	for _, pair := range [][2]string{{prefix + "1", prefix + "2"}, {"fe80::1", "fe80::2"}} {
		ipRun(t, "addr", "add", pair[0]+"/64", "dev", hostIf, "nodad")
		ipRun(t, "-n", nsName, "addr", "add", pair[1]+"/64", "dev", "eth0", "nodad")
		ipRun(t, "neigh", "replace", pair[1], "lladdr", nsMAC, "dev", hostIf, "nud", "permanent")
		ipRun(t, "-n", nsName, "neigh", "replace", pair[0], "lladdr", hostMAC, "dev", "eth0", "nud", "permanent")
	}
	return prefix + "1", fmt.Sprintf("fe80::1%%%d", nsIndex)
}

// ifaceMAC returns an interface's MAC address and index in namespace ns.
func ifaceMAC(t *testing.T, ns, name string) (string, int) {
	t.Helper()
	var ifc *net.Interface
	if err := inNetnsDo(ns, func() (err error) { ifc, err = net.InterfaceByName(name); return err }); err != nil {
		t.Fatalf("interface %s in %q: %v", name, ns, err)
	}
	return ifc.HardwareAddr.String(), ifc.Index
}
