package network

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// openInterception loads (or creates) the egress CA under dir and the
// roots intercepted upstreams are verified against: the system's, plus
// the PEM file extraCA names (an internal mirror's CA; tests).
func openInterception(dir, extraCA string) (*egress.CA, *x509.CertPool, error) {
	caDir := filepath.Join(dir, "ca")
	if err := os.MkdirAll(caDir, 0o700); err != nil {
		return nil, nil, err
	}
	ca, err := egress.LoadOrCreateCA(caDir)
	if err != nil {
		return nil, nil, err
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if extraCA != "" {
		b, err := os.ReadFile(extraCA)
		if err != nil {
			return nil, nil, fmt.Errorf("PADDOCK_EGRESS_UPSTREAM_CA: %w", err)
		}
		if !roots.AppendCertsFromPEM(b) {
			return nil, nil, fmt.Errorf("PADDOCK_EGRESS_UPSTREAM_CA: %s holds no PEM certificate", extraCA)
		}
	}
	return ca, roots, nil
}

// trustEnv points the usual TLS stacks at the mounted bundle: some
// (Node, requests, git) ignore the system store or read their own.
func trustEnv() []string {
	p := runtime.TrustBundlePath
	return []string{"SSL_CERT_FILE=" + p, "REQUESTS_CA_BUNDLE=" + p, "CURL_CA_BUNDLE=" + p, "NODE_EXTRA_CA_CERTS=" + p, "GIT_SSL_CAINFO=" + p}
}

func (n *base) trustPath(id string) string {
	return filepath.Join(n.dir, "policies", id+".ca-bundle.pem")
}

// checkSecrets refuses injection rules whose templates do not parse, or
// any rule when the daemon keeps no secrets. Whether each secret exists
// depends on the sandbox's owner (names are per owner): the controller
// checks that against the owner's secrets.
func (n *base) checkSecrets(rules []egress.Injection) error {
	if len(rules) == 0 {
		return nil
	}
	if n.sec == nil {
		return fmt.Errorf("credential injection: this daemon keeps no secrets: %w", errdefs.ErrUnavailable)
	}
	for _, r := range rules {
		if _, err := egress.ParseTemplate(r.Value); err != nil {
			return err
		}
	}
	return nil
}

func toEgressInject(in []api.Injection) []egress.Injection {
	var out []egress.Injection
	for _, r := range in {
		out = append(out, egress.Injection{Host: r.Host, Header: r.Header, Value: r.Value})
	}
	return out
}

func fromEgressInject(in []egress.Injection) []api.Injection {
	var out []api.Injection
	for _, r := range in {
		out = append(out, api.Injection{Host: r.Host, Header: r.Header, Value: r.Value})
	}
	return out
}
