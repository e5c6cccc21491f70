package cluster

import (
	"crypto/tls"
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

// RegistryTLS makes, in dir, a certificate authority of its own and a
// server certificate it signed for addr, as an operator's private
// registry has: the server's TLS configuration and the authority's
// certificate (PEM), which clients must be given to trust the registry.
func RegistryTLS(dir string, addr netip.Addr) (*tls.Config, []byte, error) {
	p, err := newPKI(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := p.issue("registry", "paddock-test-registry", nil, []string{addr.String()}); err != nil {
		return nil, nil, err
	}
	cert, err := tls.LoadX509KeyPair(p.path("registry.crt"), p.path("registry.key"))
	if err != nil {
		return nil, nil, err
	}
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return nil, nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ca, nil
}

// TrustRegistry tells the node's containerd how to reach the registry at
// addr, as a cluster's operator does for a registry of its own: over TLS
// with ca (PEM) as the authority that signed its certificate, or, with ca
// nil, over plain HTTP. containerd speaks plain HTTP to loopback
// registries unasked; one on the node's address (which pods reach too)
// needs this. containerd reads the file at each pull: no restart.
func (c *Cluster) TrustRegistry(addr netip.AddrPort, ca []byte) error {
	if !addr.IsValid() || addr.Port() == 0 {
		return fmt.Errorf("registry address %q: want an IP address and a port", addr)
	}
	dir := filepath.Join(c.registryHostsDir(), addr.String())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	server := "http://" + addr.String()
	extra := ""
	if ca != nil {
		server = "https://" + addr.String()
		caPath := filepath.Join(dir, "ca.crt")
		if err := os.WriteFile(caPath, ca, 0o600); err != nil {
			return err
		}
		extra = fmt.Sprintf("  ca = %q\n", caPath)
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n%s", server, server, extra)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o600)
}
