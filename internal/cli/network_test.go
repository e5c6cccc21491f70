package cli

import (
	"slices"
	"testing"
)

func TestSplitRules(t *testing.T) {
	hosts, cidrs := splitRules([]string{"example.com", "1.1.1.1", "10.1.2.3/16", "*.x.test", "::1", "1.1.1"})
	if want := []string{"example.com", "*.x.test", "1.1.1"}; !slices.Equal(hosts, want) {
		t.Errorf("hosts %q, want %q", hosts, want)
	}
	// Written as the daemon keeps them, so allow and deny find them in
	// the lists; IPv6 goes to the daemon, which says why it refuses it.
	if want := []string{"1.1.1.1/32", "10.1.0.0/16", "::1/128"}; !slices.Equal(cidrs, want) {
		t.Errorf("cidrs %q, want %q", cidrs, want)
	}
	if got := without([]string{"1.1.1.1/32", "8.8.8.8/32"}, cidrs); !slices.Equal(got, []string{"8.8.8.8/32"}) {
		t.Errorf("without: %q", got)
	}
}
