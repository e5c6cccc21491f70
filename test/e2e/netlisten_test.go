package e2e

import (
	"net"
	"os"
	"runtime"
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
