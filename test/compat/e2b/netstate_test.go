package e2bcompat

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/testnet"
)

// The network half of the suite: the daemon gets an upstream standing for
// the internet in a network namespace the test makes (reachable from the
// host over a veth whose addresses exist only between the two), and fixed
// DNS answers naming it, so a sandbox's request to an allowed name reaches
// a real server and a denied one is refused, with no other address ever
// involved. The upstream serves plain HTTP on 80 and HTTPS on 443 with a
// certificate of a test CA the daemon's proxy is told to trust.

// Names the daemon's resolver answers with the upstream's address, and one
// that resolves to loopback (a forbidden destination whatever the rules).
const (
	upAllowed  = "allowed.e2b.test"
	upOther    = "other.e2b.test"
	upDenied   = "denied.e2b.test"
	upAPI      = "api.e2b.test" // HTTPS, for transform rules
	upLoopback = "loopback.e2b.test"
)

// upstream is the test's internet: one namespace, its servers, and the
// daemon environment that points at it.
type upstream struct {
	env []string // for the daemon
	// tlsCert and tlsKey are a self-signed pair for a TLS server inside a
	// sandbox (network.httpsPorts).
	tlsCert, tlsKey string
	caPEM           string // the upstream's CA
	// addr is the upstream's address, addr2 a second test host's; both
	// answer HTTP on port 8080.
	addr, addr2 string
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	for _, bin := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s for the network tests", bin)
		}
	}
	s := testnet.Slot(t)
	// The same ranges test/e2e derives from a slot (test number 0); the
	// slot is this process's alone, so nothing else on the host uses them.
	rng := fmt.Sprintf("100.%d.200.0/24", 64+s)
	ns, hostIf := fmt.Sprintf("pcmp-up-%d", s), fmt.Sprintf("pcmpup-%d", s)
	hostCIDR, addr, permit := fmt.Sprintf("198.19.%d.1/30", s), fmt.Sprintf("198.19.%d.2", s), fmt.Sprintf("198.19.%d.0/30", s)
	testnet.NewHost(t, ns, hostIf, hostCIDR, addr)

	plain := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream says hello to %s", r.Host)
	})}
	go plain.Serve(listenInNetns(t, ns, addr+":80"))
	t.Cleanup(func() { plain.Close() })
	// Address rules: the upstream and a second test host (the next /30 of
	// the slot) answer on port 8080, which only a direct connection an
	// address rule allows can reach.
	ns2, hostIf2 := fmt.Sprintf("pcmp-up2-%d", s), fmt.Sprintf("pcmpup2-%d", s)
	hostCIDR2, addr2, permit2 := fmt.Sprintf("198.19.%d.5/30", s), fmt.Sprintf("198.19.%d.6", s), fmt.Sprintf("198.19.%d.4/30", s)
	testnet.NewHost(t, ns2, hostIf2, hostCIDR2, addr2)
	for _, a := range []struct{ ns, addr string }{{ns, addr}, {ns2, addr2}} {
		direct := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "direct to %s", a.addr)
		})}
		go direct.Serve(listenInNetns(t, a.ns, a.addr+":8080"))
		t.Cleanup(func() { direct.Close() })
	}
	// Forwarded packets' replies come back in by the test hosts' veths,
	// which forward only if the operator (here the test) says so.
	for _, ifname := range []string{hostIf, hostIf2} {
		setForwarding(t, ifname)
	}

	ca, caKey, caPEM := newCA(t, "E2B compat upstream root")
	leaf := newLeaf(t, ca, caKey, upAPI)
	secure := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf}},
		// The upstream never echoes a header: it answers with a digest of
		// Authorization, so the test can check what was injected without
		// the secret ever reaching the sandbox.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a := r.Header.Get("Authorization")
			sum := sha256.Sum256([]byte(a))
			if a == "" {
				fmt.Fprintf(w, "%s auth=none", r.Host)
				return
			}
			fmt.Fprintf(w, "%s auth-sha256=%s", r.Host, hex.EncodeToString(sum[:]))
		}),
	}
	go secure.ServeTLS(listenInNetns(t, ns, addr+":443"), "", "")
	t.Cleanup(func() { secure.Close() })
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}

	u := &upstream{env: []string{
		"PADDOCK_NETWORK_RANGE=" + rng,
		fmt.Sprintf("PADDOCK_EGRESS_DNS_STATIC=%s=%s;%s=%s;%s=%s;%s=%s;%s=127.0.0.1", upAllowed, addr, upOther, addr, upDenied, addr, upAPI, addr, upLoopback),
		"PADDOCK_EGRESS_PERMIT=" + permit + "," + permit2,
		"PADDOCK_EGRESS_DNS_UPSTREAM=127.0.0.1:9", // names outside the static map resolve nowhere
		"PADDOCK_EGRESS_UPSTREAM_CA=" + caFile,
	}, addr: addr, addr2: addr2}
	self, selfKey, _ := newCA(t, "localhost")
	keyDER, err := x509.MarshalECPrivateKey(selfKey)
	if err != nil {
		t.Fatal(err)
	}
	u.caPEM = string(caPEM)
	u.tlsCert = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: self.Raw}))
	u.tlsKey = string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return u
}

// nodeEnv is what the Node suite needs to know about the upstream.
func (u *upstream) nodeEnv() []string {
	return []string{
		"E2B_COMPAT_ALLOWED=" + upAllowed, "E2B_COMPAT_OTHER=" + upOther, "E2B_COMPAT_DENIED=" + upDenied,
		"E2B_COMPAT_API=" + upAPI, "E2B_COMPAT_LOOPBACK=" + upLoopback,
		"E2B_COMPAT_ADDR=" + u.addr, "E2B_COMPAT_ADDR_OTHER=" + u.addr2,
		"E2B_COMPAT_TLS_CERT=" + u.tlsCert, "E2B_COMPAT_TLS_KEY=" + u.tlsKey, "E2B_COMPAT_UPSTREAM_CA=" + u.caPEM,
	}
}

// setForwarding turns IPv4 forwarding on for a test interface and back
// off when the test ends.
func setForwarding(t *testing.T, ifname string) {
	t.Helper()
	path := filepath.Join("/proc/sys/net/ipv4/conf", ifname, "forwarding")
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(path, old, 0o644) })
}

func newCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, host string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// listenInNetns opens a TCP listener inside the named namespace; the
// socket stays there while ordinary goroutines serve it.
func listenInNetns(t *testing.T, name, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open("/run/netns/" + name)
		if err != nil {
			c <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			c <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		c <- result{ln, err}
	}()
	r := <-c
	if r.err != nil {
		t.Fatalf("listen on %s in netns %s: %v", addr, name, r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}
