package e2e

import (
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// listenInNetns opens a TCP listener inside the named network namespace
// (a test host the test made): the socket stays in that namespace while
// the test serves it from ordinary goroutines.
func listenInNetns(t *testing.T, name, addr string) net.Listener {
	t.Helper()
	lnc := make(chan net.Listener, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			errc <- err
			return
		}
		lnc <- ln
	}()
	select {
	case ln := <-lnc:
		return ln
	case err := <-errc:
		t.Fatalf("listen on %s in netns %s: %v", addr, name, err)
		return nil
	}
}

// listenPacketInNetns opens a UDP socket inside the named network
// namespace, as listenInNetns does for TCP.
func listenPacketInNetns(t *testing.T, name, addr string) net.PacketConn {
	t.Helper()
	pcc := make(chan net.PacketConn, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			errc <- err
			return
		}
		pcc <- pc
	}()
	select {
	case pc := <-pcc:
		t.Cleanup(func() { pc.Close() })
		return pc
	case err := <-errc:
		t.Fatalf("listen on udp %s in netns %s: %v", addr, name, err)
		return nil
	}
}

// newTestHost makes the network namespace name, a test host standing for
// the internet: a veth pair whose host end has hostCIDR and whose other end
// (eth0 inside) has nsAddr/30. Both are removed when the test ends.
func newTestHost(t *testing.T, name, hostIf, hostCIDR, nsAddr string) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
	_ = exec.Command("ip", "link", "del", hostIf).Run()
	run("ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run("ip", "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	run("ip", "addr", "add", hostCIDR, "dev", hostIf)
	run("ip", "link", "set", hostIf, "up")
	run("ip", "-n", name, "addr", "add", nsAddr+"/30", "dev", "eth0")
	run("ip", "-n", name, "link", "set", "eth0", "up")
}
