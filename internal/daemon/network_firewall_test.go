package daemon

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/netns"
)

func TestNetworkConfigFirewall(t *testing.T) {
	tests := []struct {
		env, want, fail string
	}{
		{"", netns.FirewallAuto, ""},
		{"auto", netns.FirewallAuto, ""},
		{"nftables", netns.FirewallNftables, ""},
		{"iptables", netns.FirewallIptables, ""},
		{"nft", "", "PADDOCK_FIREWALL: firewall \"nft\": want auto, nftables or iptables"},
		{"iptables;rm -rf /", "", "want auto, nftables or iptables"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv("PADDOCK_FIREWALL", tt.env)
			nc, err := networkConfigFromEnv()
			if tt.fail != "" {
				if err == nil || !strings.Contains(err.Error(), tt.fail) {
					t.Fatalf("err %v, want %q", err, tt.fail)
				}
				return
			}
			if err != nil || nc.Firewall != tt.want {
				t.Fatalf("%q %v, want %q", nc.Firewall, err, tt.want)
			}
		})
	}
}
