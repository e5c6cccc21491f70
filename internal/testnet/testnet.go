// Package testnet gives network tests of different packages (test/e2e,
// test/compat/e2b) what they must share to run side by side on one host:
// a slot no other test process holds, the ranges and names derived from
// it, and test hosts in network namespaces standing for the internet. It
// is imported by tests only.
package testnet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/testnet/testranges"
)

// Slots is how many test processes may run the network tests of
// test/e2e and test/compat/e2b on one host at once: slot s has the /16
// 100.(64+s).0.0 of testranges.Slots, outside the daemon's default range.
const Slots = testranges.SlotCount

// slotNet is the first two octets of slot s's /16.
func slotNet(s int) (byte, byte) {
	a := netip.MustParsePrefix(testranges.Slots).Addr().As4()
	return a[0], a[1] + byte(s)
}

var (
	claimsMu sync.Mutex
	claims   = map[string]int{}
	held     []*os.File // the claimed slots' lock files
)

// Claim takes, for the life of the test process, one of slots slots of the
// family (a lock file each, under the temporary directory) that no other
// process on the host holds, and returns its number; later calls with the
// same family return the same. Tests derive every range, address and name
// they make from it: a daemon refuses to start on a network range that
// overlaps a running daemon's, and two upstreams of one name delete each
// other, so runs sharing a machine (one package's beside another's, an
// engineer's beside CI's) must share neither.
func Claim(t testing.TB, family string, slots int) int {
	t.Helper()
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if n, ok := claims[family]; ok {
		return n
	}
	for i := range slots {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d.lock", family, i)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		// Never closed: the lock is held until the process exits. The
		// file is kept reachable, or its finalizer would close it (and
		// let the lock go) at the next garbage collection.
		held = append(held, f)
		claims[family] = i
		return i
	}
	t.Fatalf("all %d %s test slots are taken by other runs", slots, family)
	return 0
}

// Slot is the process's slot for the network tests of test/e2e and
// test/compat/e2b, which share one family so that they never meet.
func Slot(t testing.TB) int { return Claim(t, "paddock-e2e-net", Slots) }

// daemonRanges are the /24s of the slot (third octet below planBase)
// that daemons of this process hold.
var (
	daemonRangesMu sync.Mutex
	daemonRanges   [planBase]bool
)

// planBase is the third octet of test number 0's range; daemon ranges
// come from below it.
const planBase = 200

// DaemonRange gives a daemon a PADDOCK_NETWORK_RANGE of the process's
// slot that no other daemon of the process holds, free again when t
// ends: a daemon claims its range on the host and refuses to start on
// one that overlaps another's, so every daemon a test starts, even one
// that never makes a networked sandbox, needs its own (the default range
// would be held by whichever started first).
func DaemonRange(t testing.TB) string {
	t.Helper()
	s := Slot(t)
	daemonRangesMu.Lock()
	defer daemonRangesMu.Unlock()
	for k := range daemonRanges {
		if !daemonRanges[k] {
			daemonRanges[k] = true
			t.Cleanup(func() {
				daemonRangesMu.Lock()
				daemonRanges[k] = false
				daemonRangesMu.Unlock()
			})
			o1, o2 := slotNet(s)
			return fmt.Sprintf("%d.%d.%d.0/24", o1, o2, k)
		}
	}
	t.Fatalf("all %d daemon ranges of slot %d are in use", planBase, s)
	return ""
}

// TwinRanges gives two daemons ranges of the process's slot that do not
// overlap but whose tags, as daemons derived them from the range alone
// before each drew its own (four hex digits of its SHA-256), are the
// same: daemons on them then shared names, and each took the other's
// sandbox networks for orphans. Both are free again when t ends.
func TwinRanges(t testing.TB) (string, string) {
	t.Helper()
	s := Slot(t)
	daemonRangesMu.Lock()
	defer daemonRangesMu.Unlock()
	type sub struct {
		k int
		p netip.Prefix
	}
	seen := map[string]sub{}
	o1, o2 := slotNet(s)
	for k := range daemonRanges {
		if daemonRanges[k] {
			continue
		}
		for bits := 24; bits <= 28; bits++ {
			for off := 0; off < 256; off += 1 << (32 - bits) {
				p := netip.PrefixFrom(netip.AddrFrom4([4]byte{o1, o2, byte(k), byte(off)}), bits)
				sum := sha256.Sum256([]byte(p.String()))
				tag := hex.EncodeToString(sum[:2])
				if o, ok := seen[tag]; ok && o.k != k {
					for _, n := range []int{o.k, k} {
						daemonRanges[n] = true
						t.Cleanup(func() {
							daemonRangesMu.Lock()
							daemonRanges[n] = false
							daemonRangesMu.Unlock()
						})
					}
					return o.p.String(), p.String()
				}
				seen[tag] = sub{k, p}
			}
		}
	}
	t.Fatalf("no two free ranges of slot %d share a range-derived tag", s)
	return "", ""
}

// Plan is one network test's range and upstream, unique on the host.
type Plan struct {
	Range    string // PADDOCK_NETWORK_RANGE
	NS       string // the upstream's namespace
	HostIf   string // the host end of the upstream's veth
	HostCIDR string
	Upstream string // the upstream's address
	Permit   string // PADDOCK_EGRESS_PERMIT covering it
}

// NewPlan gives test number n (distinct per test within a process, below
// 56) its plan. Ranges stay in the slot's /16 of testranges.Slots, clear
// of the daemon's default range; upstreams in 198.19.<slot>.0/24.
func NewPlan(t testing.TB, n int) Plan {
	t.Helper()
	if n < 0 || n >= 256-planBase {
		t.Fatalf("network test number %d: want 0 to %d", n, 255-planBase)
	}
	s := Slot(t)
	o1, o2 := slotNet(s)
	p := Plan{
		Range:    fmt.Sprintf("%d.%d.%d.0/24", o1, o2, planBase+n),
		NS:       fmt.Sprintf("pe2e-up%d-%d", n, s),
		HostIf:   fmt.Sprintf("pe2eup%d-%d", n, s),
		HostCIDR: fmt.Sprintf("198.19.%d.%d/30", s, 4*n+1),
		Upstream: fmt.Sprintf("198.19.%d.%d", s, 4*n+2),
		Permit:   fmt.Sprintf("198.19.%d.%d/30", s, 4*n),
	}
	return p
}

// NewHost makes the network namespace name, a test host standing for the
// internet: a veth pair whose host end has hostCIDR and whose other end
// (eth0 inside) has nsAddr/30. Both are removed when the test ends.
func NewHost(t testing.TB, name, hostIf, hostCIDR, nsAddr string) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// Left over from a run of this slot that was killed: the slot is ours.
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

// InNS runs fn on a thread in the network namespace at path (a file under
// /run/netns or /proc/<pid>/ns/net), so sockets fn opens belong to that
// namespace and stay there whichever goroutine uses them afterwards.
func InNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is left locked on purpose if restoring fails: Go then
		// retires it instead of reusing it in the wrong namespace.
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// CountingDNS is a test resolver standing for an upstream: it answers
// every A query with one address and counts, per name, the queries that
// reach it.
type CountingDNS struct {
	mu    sync.Mutex
	names map[string]int
}

// Count is how many queries for name reached the resolver.
func (c *CountingDNS) Count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names[strings.ToLower(dns.Fqdn(name))]
}

// ServeCountingDNS serves DNS on pc until the test ends, answering A
// queries with answer.
func ServeCountingDNS(t testing.TB, pc net.PacketConn, answer string) *CountingDNS {
	t.Helper()
	c := &CountingDNS{names: map[string]int{}}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 {
			c.mu.Lock()
			c.names[strings.ToLower(r.Question[0].Name)]++
			c.mu.Unlock()
			if r.Question[0].Qtype == dns.TypeA {
				rr, _ := dns.NewRR(r.Question[0].Name + " 30 IN A " + answer)
				m.Answer = append(m.Answer, rr)
			}
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return c
}

// SlowStream writes "tick" lines every 100 ms for 30 s, or until the
// client goes: a long response for tests that cut connections.
func SlowStream(w http.ResponseWriter, r *http.Request) {
	for range 300 {
		if _, err := io.WriteString(w, "tick\n"); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
