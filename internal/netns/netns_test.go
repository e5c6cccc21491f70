package netns

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestLinkCarving(t *testing.T) {
	m := &Manager{opts: Options{Range: DefaultRange}, ifPrefix: "pdb845", nsPrefix: "paddock-b845-"}
	tests := []struct {
		idx         int
		gw, addr    string
		ifName      string
		wantLenUpTo int
	}{
		{0, "100.96.0.1", "100.96.0.2", "pdb8450", 15},
		{3, "100.96.0.13", "100.96.0.14", "pdb8453", 15},
		{1<<19 - 1, "100.127.255.253", "100.127.255.254", "pdb8457ffff", 15},
	}
	for _, tt := range tests {
		l := m.linkFor("abc", tt.idx)
		if l.Gateway.String() != tt.gw || l.Addr.String() != tt.addr || l.HostIf != tt.ifName {
			t.Errorf("linkFor(%d) = %+v", tt.idx, l)
		}
		if len(l.HostIf) > tt.wantLenUpTo {
			t.Errorf("interface name %q too long", l.HostIf)
		}
		if !DefaultRange.Contains(l.Gateway) || !DefaultRange.Contains(l.Addr) {
			t.Errorf("link %d outside the range", tt.idx)
		}
	}
	if l := m.linkFor("abc", 0); l.NetNS != "/run/netns/paddock-b845-abc" {
		t.Errorf("netns path %s", l.NetNS)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(context.Background(), Options{StateDir: t.TempDir(), Range: netip.MustParsePrefix("10.0.0.0/30")}); err == nil {
		t.Error("a /30 range accepted")
	}
	if _, err := New(context.Background(), Options{StateDir: t.TempDir(), Range: netip.MustParsePrefix("fd00::/64")}); err == nil {
		t.Error("an IPv6 range accepted")
	}
	m := &Manager{opts: Options{Range: DefaultRange}}
	for _, id := range []string{"", "../x", "ABC", "a b"} {
		if _, err := m.Setup(context.Background(), id, nil); err == nil {
			t.Errorf("Setup(%q) accepted", id)
		}
		if err := m.Teardown(context.Background(), id); err == nil {
			t.Errorf("Teardown(%q) accepted", id)
		}
	}
}

// TestOrphansByOwnTagOnly: a namespace without a record is this daemon's
// to remove only when it carries the daemon's own drawn tag; under a
// legacy tag, which every older daemon on the range shared, it is left.
func TestOrphansByOwnTagOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	drawn, err := newTag()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tag    string
		legacy bool
	}{{drawn, false}, {drawn[4:], true}} {
		m := &Manager{opts: Options{Range: DefaultRange, StateDir: t.TempDir()}, tag: tt.tag, legacy: tt.legacy,
			ifPrefix: "pd" + tt.tag, nsPrefix: "paddock-" + tt.tag + "-"}
		const id = "unitorphan"
		if out, err := exec.Command("ip", "netns", "add", m.nsName(id)).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", m.nsName(id)).Run() })
		listed := slices.Contains(m.List(), id)
		if err := m.Teardown(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(m.NSPath(id))
		if tt.legacy && (listed || statErr != nil) {
			t.Errorf("legacy tag %s: listed %v, namespace removed %v; want it left alone", tt.tag, listed, statErr != nil)
		}
		if !tt.legacy && (!listed || statErr == nil) {
			t.Errorf("own tag %s: listed %v, namespace kept %v; want it found and removed", tt.tag, listed, statErr == nil)
		}
	}
}
