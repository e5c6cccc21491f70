package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Lifetimes of the interception certificates. Leaves are short-lived so a
// leaked one is soon worthless; they are minted again before expiry.
const (
	caValidity    = 10 * 365 * 24 * time.Hour
	leafValidity  = 24 * time.Hour
	leafRenewLead = 2 * time.Hour
	maxLeafCache  = 1024
)

// CA is the daemon's egress certificate authority: it signs leaf
// certificates for the hosts whose HTTPS the proxy intercepts. Its key
// never leaves the daemon's state directory.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// CA file names in the directory LoadOrCreateCA is given.
const (
	CACertFile = "egress-ca.pem"
	caKeyFile  = "egress-ca-key.pem"
)

// LoadOrCreateCA reads the CA in dir or creates one (ECDSA P-256, path
// length 0: it can sign leaves, never another CA).
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, caKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		return parseCA(certPEM, keyPEM)
	}
	if !errors.Is(cerr, os.ErrNotExist) && cerr != nil {
		return nil, fmt.Errorf("egress CA: %w", cerr)
	}
	if !errors.Is(kerr, os.ErrNotExist) && kerr != nil {
		return nil, fmt.Errorf("egress CA key: %w", kerr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 4)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: "Paddock egress CA " + hex.EncodeToString(id), Organization: []string{"Paddock"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	// The key first, exclusively and 0600: a certificate without its key
	// is recreated, a key without a certificate never happens.
	if err := writeExclusive(keyPath, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	if err := writeExclusive(certPath, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return parseCA(certPEM, keyPEM)
}

func writeExclusive(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("egress CA: files are not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("egress CA: certificate and key do not belong together")
	}
	return &CA{cert: cert, key: key, certPEM: certPEM, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA certificate (never the key), for trust stores.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// Name is the CA's subject common name.
func (ca *CA) Name() string { return ca.cert.Subject.CommonName }

// Leaf returns a certificate for host, minted on first use and again
// when the cached one nears expiry.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := time.Now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && now.Add(leafRenewLead).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(leafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	if len(ca.leaves) >= maxLeafCache {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}

func randSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
