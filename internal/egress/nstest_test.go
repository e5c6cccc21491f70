package egress_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/testnet"
	"github.com/paddock-dev/paddock/internal/testnet/testranges"
)

// testSlots is how many runs of these tests may share a host (checkouts of
// several engineers, CI): each run claims a slot for its life, and every
// namespace, interface, range and address it makes derives from it, so
// two runs never remove or shadow each other's.
const testSlots = 16

func slot(t testing.TB) int { return testnet.Claim(t, "paddock-egress-test", testSlots) }

// testRange is this run's sandbox range number k (one per kind of test,
// below 16): the /24 16k+slot of testranges.Egress, outside the daemon's
// default range and the other tests' ranges.
func testRange(t testing.TB, k int) netip.Prefix {
	if k < 0 || k >= 256/testSlots {
		t.Fatalf("egress test range %d: want 0 to %d", k, 256/testSlots-1)
	}
	a := netip.MustParsePrefix(testranges.Egress).Addr().As4()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{a[0], a[1], byte(16*k + slot(t)), 0}), 24)
}

// upstreamPlan names the upstream namespace number k of this run.
type upstreamPlan struct {
	ns, hostIf       string
	hostAddr, upAddr string // the veth's host and upstream ends
	permit           netip.Prefix
}

func newUpstreamPlan(t testing.TB, k int) upstreamPlan {
	n := 100 + 16*k + slot(t)
	return upstreamPlan{
		ns: fmt.Sprintf("pteg%d-up%d", slot(t), k), hostIf: fmt.Sprintf("pteg%dup%d", slot(t), k),
		hostAddr: fmt.Sprintf("198.18.%d.1", n), upAddr: fmt.Sprintf("198.18.%d.2", n),
		permit: netip.MustParsePrefix(fmt.Sprintf("198.18.%d.0/30", n)),
	}
}

// start makes the upstream namespace.
func (p upstreamPlan) start(t testing.TB) *upstreamNS {
	return newUpstreamNS(t, p.ns, p.hostIf, p.hostAddr+"/30", p.upAddr+"/30")
}

// requireRoot skips tests that build namespaces and firewall rules.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and firewall rules")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	_, nftErr := exec.LookPath("nft")
	_, iptErr := exec.LookPath("iptables")
	if nftErr != nil && iptErr != nil {
		t.Skip("needs nft or iptables")
	}
}

func sh(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func inNS(t testing.TB, path string, fn func() error) error {
	t.Helper()
	return testnet.InNS(path, fn)
}

// upstreamNS is a namespace standing for "the internet": it is reached from
// the host over a veth with addresses that exist only between the two.
type upstreamNS struct {
	path   string
	addr   string // upstream's address
	host   string // the host's end of the veth
	permit netip.Prefix
}

func newUpstreamNS(t testing.TB, name, hostIf, hostCIDR, nsCIDR string) *upstreamNS {
	t.Helper()
	_ = exec.Command("ip", "netns", "del", name).Run()
	_ = exec.Command("ip", "link", "del", hostIf).Run()
	sh(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	sh(t, "ip", "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	sh(t, "ip", "addr", "add", hostCIDR, "dev", hostIf)
	sh(t, "ip", "link", "set", hostIf, "up")
	sh(t, "ip", "-n", name, "addr", "add", nsCIDR, "dev", "eth0")
	sh(t, "ip", "-n", name, "link", "set", "eth0", "up")
	sh(t, "ip", "-n", name, "link", "set", "lo", "up")
	addr, _, _ := strings.Cut(nsCIDR, "/")
	host, _, _ := strings.Cut(hostCIDR, "/")
	pfx := netip.MustParsePrefix(nsCIDR).Masked()
	return &upstreamNS{path: "/run/netns/" + name, addr: addr, host: host, permit: pfx}
}

func (u *upstreamNS) listen(t testing.TB, port string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := inNS(t, u.path, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(u.addr, port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialFrom dials from inside the namespace at path.
func dialFrom(t testing.TB, path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNS(t, path, func() (err error) {
			d := net.Dialer{}
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}
