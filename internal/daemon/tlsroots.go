package daemon

import (
	"crypto/x509"
	"sync"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The daemon speaks TLS to registries (image pulls and pushes), object
// storage (S3 backups) and the egress proxy's upstreams. Where the host
// gives no certificate authorities at all, as in deploy/kubernetes's image
// (the static binary alone, FROM scratch), Go's verifier would trust
// nothing and every such connection would fail with "certificate signed by
// unknown authority". The public web's roots (Mozilla's, as
// golang.org/x/crypto/x509roots/fallback/bundle ships them) are then used
// instead; a host that has its own (/etc/ssl/certs, SSL_CERT_FILE,
// SSL_CERT_DIR) keeps using its own, and the bundle is never looked at.
//
// They are set when the daemon starts, not by importing the fallback
// package, whose init parses the whole bundle in every process of the
// binary: every CLI command paid about 4 ms and 650 KB for it at start.

var fallbackRoots sync.Once

// useFallbackRoots makes the bundle the process's roots where the host has
// none. Only the first call does anything.
func useFallbackRoots() {
	fallbackRoots.Do(func() {
		pool := x509.NewCertPool()
		for root := range bundle.Roots() {
			cert, err := x509.ParseCertificate(root.Certificate)
			if err != nil {
				continue // the bundle is fixed at build time; its tests parse every root
			}
			if root.Constraint != nil {
				pool.AddCertWithConstraint(cert, root.Constraint)
			} else {
				pool.AddCert(cert)
			}
		}
		x509.SetFallbackRoots(pool)
	})
}
