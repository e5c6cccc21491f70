package egress

import (
	"bytes"
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
	"io/fs"
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
//
// The key file is the CA: it holds the key and, after it, the
// certificate, and it is published exclusively (writeExclusive), complete
// or not at all. So daemons creating the CA at the same time end with the
// same one (whoever loses the publication reads the winner's), and a
// creator that dies leaves either nothing or a whole CA. The certificate
// file beside it is a copy for operators, written again whenever it is
// missing or differs.
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, caKeyFile)
	keyPEM, err := os.ReadFile(keyPath)
	switch {
	case err == nil:
		return loadCA(certPath, keyPEM)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	keyPEM, err = newCAFile()
	if err != nil {
		return nil, err
	}
	if err := writeExclusive(keyPath, keyPEM, 0o600); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("egress CA key: %w", err)
		}
		// Another creator published first: its CA is the one.
		if keyPEM, err = os.ReadFile(keyPath); err != nil {
			return nil, fmt.Errorf("egress CA key: %w", err)
		}
	}
	return loadCA(certPath, keyPEM)
}

// newCAFile makes a CA and returns its key file: the key's PEM block, then
// the certificate's.
func newCAFile() ([]byte, error) {
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
	out := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...), nil
}

// loadCA parses a key file and makes sure the certificate file beside it
// is its certificate. A key file of an older layout (the key alone) takes
// the certificate from that file.
func loadCA(certPath string, keyFile []byte) (*CA, error) {
	var keyPEM, certPEM []byte
	for rest := keyFile; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "EC PRIVATE KEY":
			keyPEM = pem.EncodeToMemory(b)
		case "CERTIFICATE":
			certPEM = pem.EncodeToMemory(b)
		}
	}
	if keyPEM == nil {
		return nil, errors.New("egress CA key: the key file holds no EC PRIVATE KEY")
	}
	onDisk, err := os.ReadFile(certPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	if certPEM == nil {
		if onDisk == nil {
			return nil, fmt.Errorf("egress CA: %s holds a key without its certificate and %s is missing; remove the key file to create a new CA", filepath.Join(filepath.Dir(certPath), caKeyFile), certPath)
		}
		certPEM = onDisk
	}
	ca, err := parseCA(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(onDisk, certPEM) {
		if err := writeReplace(certPath, certPEM, 0o644); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
	}
	return ca, nil
}

// writeExclusive creates path holding b, or fails with fs.ErrExist if it
// exists. The content is written and synced under a temporary name in the
// same directory (O_EXCL) and then linked to path: link(2) never replaces
// a file, so of concurrent creators exactly one succeeds, and nobody ever
// sees a partly written file.
func writeExclusive(path string, b []byte, mode os.FileMode) error {
	tmp, err := writeTemp(path, b, mode)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Link(tmp, path)
}

// writeReplace puts b at path atomically, replacing what is there.
func writeReplace(path string, b []byte, mode os.FileMode) error {
	tmp, err := writeTemp(path, b, mode)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes b, synced and with mode, to a new file beside path.
func writeTemp(path string, b []byte, mode os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
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
