package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/testnet"
)

// netPlan is one network test's range and upstream, unique on the host
// (internal/testnet, shared with the E2B compatibility suite).
type netPlan = testnet.Plan

// newNetPlan gives test number n (distinct per test, below 64) its plan.
func newNetPlan(t *testing.T, n int) netPlan { return testnet.NewPlan(t, n) }

// netSlot is this process's network test slot.
func netSlot(t *testing.T) int { return testnet.Slot(t) }

// netTag is the tag the daemon drew for its state dir: it names the
// daemon's namespaces, veths, nftables table and iptables chains.
func (d *daemon) netTag() string {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.stateDir, "network", "links", "tag"))
	if err != nil {
		d.t.Fatalf("the daemon's network tag: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// newTestHost makes a test host in a network namespace, removed when the
// test ends.
func newTestHost(t *testing.T, name, hostIf, hostCIDR, nsAddr string) {
	t.Helper()
	testnet.NewHost(t, name, hostIf, hostCIDR, nsAddr)
}
