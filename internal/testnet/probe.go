package testnet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Outcome names what a connection attempt saw: "answered", "timeout" (a
// drop: nothing came back), "refused" (some stack saw the packet),
// "unreachable", or the error.
func Outcome(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "answered"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	}
	return "error: " + err.Error()
}

// ProbeTCP connects to addr from the network namespace at ns ("" for the
// test's own) and says what it saw (Outcome).
func ProbeTCP(ns, network, addr string, timeout time.Duration) string {
	var res string
	dial := func() error {
		c, err := net.DialTimeout(network, addr, timeout)
		if err == nil {
			c.Close()
		}
		res = Outcome(err)
		return nil
	}
	var err error
	if ns == "" {
		err = dial()
	} else {
		err = InNS(ns, dial)
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return res
}

// IPRun runs ip(8) and fails the test if it fails.
func IPRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// HTTPSUpstream is an HTTPS server in a test host of its own (NewHost),
// serving api.test.example and other.test.example with a certificate of a
// test CA, standing for an API that credential injection adds headers
// for. It records each request's host, path and Authorization, and never
// echoes a header back (the sandbox must not learn the secret).
type HTTPSUpstream struct {
	CAPEM []byte // the test CA's certificate
	mu    sync.Mutex
	seen  []string // "host path auth=VALUE"
}

// Saw lists the recorded requests that pred keeps.
func (u *HTTPSUpstream) Saw(pred func(string) bool) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, s := range u.seen {
		if pred(s) {
			out = append(out, s)
		}
	}
	return out
}

// NewHTTPSUpstream makes the test host name (NewHost) and serves HTTPS on
// nsAddr:443 inside it until the test ends. /redirect redirects to
// https://other.test.example/landing.
func NewHTTPSUpstream(t testing.TB, name, hostIf, hostCIDR, nsAddr string) *HTTPSUpstream {
	t.Helper()
	NewHost(t, name, hostIf, hostCIDR, nsAddr)

	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Injection Test Upstream Root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.test.example"},
		DNSNames:  []string{"api.test.example", "other.test.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	u := &HTTPSUpstream{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}

	var ln net.Listener
	if err := InNS("/run/netns/"+name, func() (err error) {
		ln, err = net.Listen("tcp", nsAddr+":443")
		return err
	}); err != nil {
		t.Fatalf("listen on %s:443 in netns %s: %v", nsAddr, name, err)
	}
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.mu.Lock()
			u.seen = append(u.seen, fmt.Sprintf("%s %s auth=%s", r.Host, r.URL.Path, r.Header.Get("Authorization")))
			u.mu.Unlock()
			if r.URL.Path == "/redirect" {
				http.Redirect(w, r, "https://other.test.example/landing", http.StatusFound)
				return
			}
			fmt.Fprintf(w, "served %s%s authorized=%v\n", r.Host, r.URL.Path, r.Header.Get("Authorization") != "")
		}),
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return u
}
