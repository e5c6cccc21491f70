// Package testranges names the IPv4 ranges in which this repository's
// tests and bench harness put sandbox networks on the host. All lie in
// the shared address space 100.64.0.0/10 and outside the daemon's default
// sandbox range (100.96.0.0/11), so tests never meet a daemon running on
// the defaults on the same host (nor take its range lock), and none
// overlaps another. The package has no dependencies, so the bench harness
// imports it as well as the tests; its test holds the ranges to that.
package testranges

const (
	// Slots holds the network test slots of internal/testnet: slot s
	// (below SlotCount) has 100.(64+s).0.0/16, daemon ranges and test
	// plans alike.
	Slots = "100.64.0.0/12"
	// SlotCount is how many /16 slots Slots holds.
	SlotCount = 16
	// Egress holds internal/egress's namespace tests: their range k of
	// slot s is 100.80.(16k+s).0/24.
	Egress = "100.80.0.0/16"
	// Bench is the bench harness daemon's PADDOCK_NETWORK_RANGE.
	Bench = "100.81.232.0/24"
)
