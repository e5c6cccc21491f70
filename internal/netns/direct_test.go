package netns

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// TestDirectLifecycle drives each backend's address rules in a namespace
// of its own: added with the sandbox, changed (the old prefixes gone, the
// new there), changed again with the old elements already missing, and
// gone with the sandbox.
func TestDirectLifecycle(t *testing.T) {
	for _, backend := range []string{FirewallNftables, FirewallIptables} {
		t.Run(backend, func(t *testing.T) {
			ns := scratchNetns(t)
			var fw firewall
			var dump func() string
			switch backend {
			case FirewallNftables:
				if _, err := exec.LookPath("nft"); err != nil {
					t.Skip("needs nft (Debian package nftables)")
				}
				fw = newNft("b845", DefaultRange, testPorts)
			default:
				if _, err := exec.LookPath("iptables-save"); err != nil {
					t.Skip("needs iptables-save (Debian package iptables)")
				}
				fw = newIptables("b845", DefaultRange, testPorts)
				dump = func() string { return saveIn(t, ns, "iptables-save") }
			}
			if backend == FirewallNftables {
				dump = func() string {
					var out []byte
					inScratch(t, ns, func(context.Context) error {
						out, _ = exec.Command("nft", "list", "ruleset").CombinedOutput()
						return nil
					})
					return string(out)
				}
			}
			l := directLinks()
			all := func() []Link { return l }
			t.Cleanup(func() { _ = inNetns(ns, func() error { return fw.close(context.Background()) }) })
			has := func(step string, want map[string]bool) {
				t.Helper()
				s := dump()
				for dst, ok := range want {
					if got := strings.Contains(s, dst); got != ok {
						t.Errorf("%s: %s present %v, want %v:\n%s", step, dst, got, ok, s)
					}
				}
			}
			inScratch(t, ns, fw.reset)
			inScratch(t, ns, func(ctx context.Context) error { return fw.add(ctx, l[1], all) })
			has("add", map[string]bool{"198.19.0.0/30": true, "8.8.8.8": true})

			old := l[1].Direct
			l[1].Direct = []netip.Prefix{netip.MustParsePrefix("8.8.8.8/32"), netip.MustParsePrefix("9.9.9.0/24")}
			inScratch(t, ns, func(ctx context.Context) error { return fw.setDirect(ctx, l[1], old, all) })
			has("change", map[string]bool{"198.19.0.0/30": false, "8.8.8.8": true, "9.9.9.0/24": true})
			// The record says more than the firewall holds.
			inScratch(t, ns, func(ctx context.Context) error { return fw.setDirect(ctx, l[1], old, all) })
			has("change again", map[string]bool{"198.19.0.0/30": false, "8.8.8.8": true, "9.9.9.0/24": true})

			old = l[1].Direct
			l[1].Direct = nil
			inScratch(t, ns, func(ctx context.Context) error { return fw.setDirect(ctx, l[1], old, all) })
			has("none", map[string]bool{"8.8.8.8": false, "9.9.9.0/24": false})

			l[1].Direct = old
			inScratch(t, ns, func(ctx context.Context) error { return fw.setDirect(ctx, l[1], nil, all) })
			inScratch(t, ns, func(ctx context.Context) error { return fw.remove(ctx, l[1]) })
			has("remove", map[string]bool{"8.8.8.8": false, "9.9.9.0/24": false, "pdb8451": false})
		})
	}
}
