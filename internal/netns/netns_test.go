package netns

import (
	"context"
	"net/netip"
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
		if _, err := m.Setup(context.Background(), id); err == nil {
			t.Errorf("Setup(%q) accepted", id)
		}
		if err := m.Teardown(context.Background(), id); err == nil {
			t.Errorf("Teardown(%q) accepted", id)
		}
	}
}
