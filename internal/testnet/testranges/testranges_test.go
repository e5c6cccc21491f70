package testranges_test

import (
	"net/netip"
	"testing"

	"github.com/paddock-dev/paddock/internal/netns"
	"github.com/paddock-dev/paddock/internal/testnet/testranges"
)

// testCluster is the Kubernetes test cluster's pod and service pool
// (test/kubernetes/cluster).
var testCluster = netip.MustParsePrefix("10.213.0.0/16")

// TestRangesApart: every range tests and the bench put sandbox networks
// in lies in 100.64.0.0/10, outside the daemon's default range and the
// test cluster's pool, and apart from every other one; the test slots fit
// their range.
func TestRangesApart(t *testing.T) {
	shared := netip.MustParsePrefix("100.64.0.0/10")
	ranges := map[string]string{
		"Slots":  testranges.Slots,
		"Egress": testranges.Egress,
		"Bench":  testranges.Bench,
	}
	parsed := map[string]netip.Prefix{}
	for name, s := range ranges {
		p, err := netip.ParsePrefix(s)
		if err != nil || p != p.Masked() {
			t.Fatalf("%s = %q is not a prefix (%v)", name, s, err)
		}
		parsed[name] = p
		if !shared.Contains(p.Addr()) || p.Bits() < shared.Bits() {
			t.Errorf("%s %s is outside %s", name, p, shared)
		}
		for _, other := range []struct {
			what string
			p    netip.Prefix
		}{{"the daemon's default range", netns.DefaultRange}, {"the test cluster's pool", testCluster}} {
			if p.Overlaps(other.p) {
				t.Errorf("%s %s overlaps %s %s", name, p, other.what, other.p)
			}
		}
	}
	for a, pa := range parsed {
		for b, pb := range parsed {
			if a < b && pa.Overlaps(pb) {
				t.Errorf("%s %s overlaps %s %s", a, pa, b, pb)
			}
		}
	}
	// Slot s is the /16 at the slot range's second octet plus s.
	slots := parsed["Slots"]
	first := slots.Addr().As4()
	last := netip.PrefixFrom(netip.AddrFrom4([4]byte{first[0], first[1] + testranges.SlotCount - 1, 0, 0}), 16)
	if slots.Bits() > 16 || !slots.Contains(last.Addr()) || !slots.Contains(netip.AddrFrom4([4]byte{first[0], first[1] + testranges.SlotCount - 1, 255, 255})) {
		t.Errorf("slot %d's %s is outside Slots %s", testranges.SlotCount-1, last, slots)
	}
	if n := 1 << (16 - slots.Bits()); n != testranges.SlotCount {
		t.Errorf("Slots %s holds %d /16s, SlotCount says %d", slots, n, testranges.SlotCount)
	}
	// The egress tests' range number k of slot s is the /24 16k+s.
	if e := parsed["Egress"]; e.Bits() != 16 {
		t.Errorf("Egress %s: want a /16 (256 /24s: 16 ranges of 16 slots)", e)
	}
}
