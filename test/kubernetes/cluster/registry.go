package cluster

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// registryHostsDir is where the node's containerd looks for a registry's
// hosts.toml (its CRI plugin's registry config_path), one directory per
// registry host.
func (c *Cluster) registryHostsDir() string {
	return filepath.Join(c.Dir, "containerd", "certs.d")
}

// TrustPlainHTTPRegistry lets the node pull from the registry at addr over
// plain HTTP, as a cluster's operator does for a registry of its own
// without TLS. containerd speaks plain HTTP to loopback registries
// unasked; one on the node's address (which pods reach too) needs this.
// containerd reads the file at each pull, so no restart is needed.
func (c *Cluster) TrustPlainHTTPRegistry(addr netip.AddrPort) error {
	if !addr.IsValid() || addr.Port() == 0 {
		return fmt.Errorf("registry address %q: want an IP address and a port", addr)
	}
	dir := filepath.Join(c.registryHostsDir(), addr.String())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+addr.String(), "http://"+addr.String())
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o600)
}
