package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTLSRootsWithoutHostRoots: a daemon on a host with no certificate
// authorities (deploy/kubernetes's image holds the binary alone) still
// trusts the public web's roots, and a host with roots of its own keeps
// exactly those. Checked in child processes of this test binary, whose
// roots are read from the files the test names.
func TestTLSRootsWithoutHostRoots(t *testing.T) {
	if os.Getenv("PADDOCK_TEST_ROOTS_CHILD") == "1" {
		useFallbackRoots() // as Run does
		os.Stdout.WriteString(describeRoots(os.Getenv("SSL_CERT_FILE")) + "\n")
		return
	}
	dir := t.TempDir()
	child := func(certFile string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestTLSRootsWithoutHostRoots$")
		cmd.Env = append(os.Environ(), "PADDOCK_TEST_ROOTS_CHILD=1", "SSL_CERT_FILE="+certFile, "SSL_CERT_DIR="+filepath.Join(dir, "no-such-dir"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v: %s", err, out)
		}
		first, _, _ := strings.Cut(string(out), "\n") // the test framework's lines follow
		return first
	}
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := child(empty); got != "other roots" {
		t.Errorf("with no host roots: %q, want the bundle's roots", got)
	}
	own := filepath.Join(dir, "own.pem")
	if err := os.WriteFile(own, selfSignedCA(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := child(own); got != "the host's roots alone" {
		t.Errorf("with a host root: %q", got)
	}
}

// describeRoots says what the process trusts: nothing, exactly the
// certificates of file, or other roots.
func describeRoots(file string) string {
	pool, err := x509.SystemCertPool()
	if err != nil {
		return "error: " + err.Error()
	}
	if pool.Equal(x509.NewCertPool()) {
		return "nothing"
	}
	hosts := x509.NewCertPool()
	if b, err := os.ReadFile(file); err == nil {
		hosts.AppendCertsFromPEM(b)
	}
	if pool.Equal(hosts) {
		return "the host's roots alone"
	}
	return "other roots"
}

// selfSignedCA is a new certificate authority's certificate, PEM-encoded.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "paddock test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
