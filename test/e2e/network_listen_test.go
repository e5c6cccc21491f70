package e2e

import (
	"net"
	"testing"

	"github.com/paddock-dev/paddock/internal/testnet"
)

// listenInNetns opens a TCP listener inside the named network namespace
// (a test host the test made): the socket stays in that namespace while
// the test serves it from ordinary goroutines.
func listenInNetns(t *testing.T, name, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := testnet.InNS("/run/netns/"+name, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in netns %s: %v", addr, name, err)
	}
	return ln
}

// listenPacketInNetns opens a UDP socket inside the named network
// namespace, as listenInNetns does for TCP; it is closed when the test
// ends.
func listenPacketInNetns(t *testing.T, name, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	err := testnet.InNS("/run/netns/"+name, func() (err error) {
		pc, err = net.ListenPacket("udp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen on udp %s in netns %s: %v", addr, name, err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}
