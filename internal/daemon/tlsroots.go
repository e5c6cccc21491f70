package daemon

// The daemon speaks TLS to registries (image pulls and pushes), object
// storage (S3 backups) and the egress proxy's upstreams. Where the host
// gives no certificate authorities at all, as in deploy/kubernetes's image
// (the static binary alone, FROM scratch), Go's verifier would trust
// nothing and every such connection would fail with "certificate signed by
// unknown authority". This bundle of the public web's roots (Mozilla's,
// as golang.org/x/crypto/x509roots/fallback ships them) is then used
// instead; a host that has its own (/etc/ssl/certs, SSL_CERT_FILE,
// SSL_CERT_DIR) keeps using its own, and the bundle is never looked at.
import _ "golang.org/x/crypto/x509roots/fallback"
