package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// netSlots is how many e2e runs may run network tests on one host at once.
const netSlots = 32

var (
	slotOnce sync.Once
	slotNum  int
	slotErr  error
)

// netSlot claims, for the life of this test process, a slot no other
// concurrent run on the host holds. Two daemons given the same network
// range each take the other's namespaces for orphans and remove them, and
// two upstreams of one name delete each other: runs sharing a machine
// (engineers' runs beside CI's) must not share either.
func netSlot(t *testing.T) int {
	t.Helper()
	slotOnce.Do(func() {
		for i := range netSlots {
			f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("paddock-e2e-net-%d.lock", i)), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				slotErr = err
				return
			}
			if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				f.Close()
				continue
			}
			// Never closed: the lock is held until the process exits.
			slotNum = i
			return
		}
		slotErr = fmt.Errorf("all %d network test slots are taken by other runs", netSlots)
	})
	if slotErr != nil {
		t.Fatal(slotErr)
	}
	return slotNum
}

// netPlan is one network test's range and upstream, unique on the host.
type netPlan struct {
	Range    string // PADDOCK_NETWORK_RANGE
	Tag      string // names the daemon's chains, interfaces and namespaces
	NS       string // the upstream's namespace
	HostIf   string // the host end of the upstream's veth
	HostCIDR string
	Upstream string // the upstream's address
	Permit   string // PADDOCK_EGRESS_PERMIT covering it
}

// newNetPlan gives test number n (distinct per test, below 64) its plan.
// Ranges stay in 100.64.0.0/11, clear of the daemon's default range.
func newNetPlan(t *testing.T, n int) netPlan {
	t.Helper()
	s := netSlot(t)
	p := netPlan{
		Range:    fmt.Sprintf("100.%d.%d.0/24", 64+s, 200+n),
		NS:       fmt.Sprintf("pe2e-up%d-%d", n, s),
		HostIf:   fmt.Sprintf("pe2eup%d-%d", n, s),
		HostCIDR: fmt.Sprintf("198.19.%d.%d/30", s, 4*n+1),
		Upstream: fmt.Sprintf("198.19.%d.%d", s, 4*n+2),
		Permit:   fmt.Sprintf("198.19.%d.%d/30", s, 4*n),
	}
	sum := sha256.Sum256([]byte(p.Range))
	p.Tag = hex.EncodeToString(sum[:2])
	return p
}
