package config

import "fmt"

// What a sandbox created through the E2B API gets when the request says
// nothing about internet access (E2BDefaultNetwork).
const (
	// E2BNetworkNone: no network, Paddock's own default.
	E2BNetworkNone = "none"
	// E2BNetworkAll: egress through the proxy to any host name, E2B's
	// default; the proxy's forbidden ranges, ledger and DNS control still
	// apply.
	E2BNetworkAll = "all"
)

func (c *Config) applyE2BEnv(getenv func(string) string) {
	if v := getenv("PADDOCK_E2B_DEFAULT_NETWORK"); v != "" {
		c.E2BDefaultNetwork = v
	}
}

func (c *Config) validateE2B() []error {
	switch c.E2BDefaultNetwork {
	case E2BNetworkNone, E2BNetworkAll:
		return nil
	}
	return []error{fmt.Errorf("e2b default network %q: want %s or %s", c.E2BDefaultNetwork, E2BNetworkNone, E2BNetworkAll)}
}
