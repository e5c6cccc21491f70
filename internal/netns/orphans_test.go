package netns

import (
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestIptablesTagsAndHookedRange(t *testing.T) {
	rules := strings.Join([]string{
		"-P INPUT ACCEPT",
		"-N PADDOCK-IN-x0aaa001",
		"-N PADDOCK-FWD-x0aaa001",
		"-N PADDOCK-IN-b845",
		"-N PADDOCK-DIR-3-x0ccc003",
		"-N PADDOCK-IN-notatag",
		"-N KUBE-FIREWALL",
		"-A INPUT -i pdx0aaa001+ -j PADDOCK-IN-x0aaa001",
		"-A INPUT -d 100.99.0.0/24 -j PADDOCK-IN-x0aaa001",
		"-A INPUT -d 100.98.0.0/24 -j PADDOCK-IN-b845",
	}, "\n")
	got := iptablesTags(rules)
	if len(got) != 2 || !got["x0aaa001"] || !got["b845"] {
		t.Fatalf("tags %v, want x0aaa001 and b845", got)
	}
	if p, ok := hookedRange(rules, "x0aaa001"); !ok || p != netip.MustParsePrefix("100.99.0.0/24") {
		t.Fatalf("range of x0aaa001: %v %v", p, ok)
	}
	if _, ok := hookedRange(rules, "x0ccc003"); ok {
		t.Fatal("a range for a tag with no INPUT hook")
	}
	orphans := orphanTags(map[string]bool{"x0aaa001": true, "b845": true}, map[string]bool{"b845": true}, t.TempDir())
	if !slices.Equal(orphans, []string{"x0aaa001"}) {
		t.Fatalf("orphans %v, want x0aaa001 alone", orphans)
	}
}

// TestNewRemovesOrphanRules: a daemon that was killed leaves its rules,
// whose drops for its range would drop the traffic of the next daemon on
// that range. A new daemon removes the rules of daemons that are gone and
// left no sandbox, and keeps those of a daemon that runs.
func TestNewRemovesOrphanRules(t *testing.T) {
	ns := scratchNetns(t)
	for _, tool := range []string{"nft", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	rng := netip.MustParsePrefix("100.99.0.0/24")
	claims := filepath.Join(t.TempDir(), "ranges")
	inScratch(t, ns, func(ctx context.Context) error {
		// Gone: an nftables daemon and an iptables daemon on the range.
		if err := newNft("x0aaa001", rng, testPorts).reset(ctx); err != nil {
			return err
		}
		if err := newIptables("x0bbb002", rng, testPorts).reset(ctx); err != nil {
			return err
		}
		// Running: holds its claim (another range).
		other := netip.MustParsePrefix("100.99.8.0/24")
		live, err := claimRange(claims, nsDir, other, "/state/live", "x0ccc003")
		if err != nil {
			return err
		}
		defer live.Release()
		if err := newNft("x0ccc003", other, testPorts).reset(ctx); err != nil {
			return err
		}
		m, err := New(ctx, Options{StateDir: filepath.Join(t.TempDir(), "net"), Range: rng, Ports: testPorts, Firewall: FirewallNftables, Owner: "/state/new", ClaimDir: claims})
		if err != nil {
			return err
		}
		defer m.Close(ctx)
		tags := firewallTags(ctx)
		if tags["x0aaa001"] || tags["x0bbb002"] {
			t.Errorf("rules of gone daemons left: %v", tags)
		}
		if !tags["x0ccc003"] || !tags[m.tag] {
			t.Errorf("rules of running daemons removed: %v (this one is %s)", tags, m.tag)
		}
		if out, _ := exec.Command("iptables-save").CombinedOutput(); strings.Contains(string(out), "x0bbb002") {
			t.Errorf("iptables rules of the gone daemon left:\n%s", out)
		}
		return nil
	})
}
