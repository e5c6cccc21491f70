package egress_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/netns"
)

const canary = "canary-5f1e0b7d9a3c"

// testPKI is a CA standing for a public one, and a server certificate it
// issued for the upstream's names.
type testPKI struct {
	pool *x509.CertPool
	cert tls.Certificate
	name string // issuer common name
}

func newTestPKI(t testing.TB, hosts ...string) *testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Upstream Test Root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &testPKI{pool: pool, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, name: "Upstream Test Root"}
}

// injEnv is a sandbox namespace whose proxy injects a header for
// api.test.example, and an upstream serving both test names over HTTPS.
type injEnv struct {
	up     *upstreamNS
	srv    *egress.Server
	link   netns.Link
	ca     *egress.CA
	pki    *testPKI
	mu     sync.Mutex
	seen   []string // "host path authorization" per upstream request
	refuse []egress.Refusal
}

func (e *injEnv) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

func newInjEnv(t testing.TB) *injEnv {
	t.Helper()
	requireRoot(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	up := newUpstreamPlan(t, 1).start(t)
	e := &injEnv{up: up, pki: newTestPKI(t, "api.test.example", "other.test.example")}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.seen = append(e.seen, r.Host+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		e.mu.Unlock()
		auth := r.Header.Get("Authorization")
		if r.Method == "TRACE" { // echoes the request, as TRACE does
			w.Header().Set("Content-Type", "message/http")
			_ = r.Write(w)
			return
		}
		switch r.URL.Path {
		case "/echo-headers": // a debugging endpoint that reflects the request
			w.Header().Set("Trailer", "X-Trailer-Auth")
			w.Header().Set("X-Echo-Auth", auth)
			w.Header().Set("X-Echo-"+strings.TrimPrefix(auth, "Bearer "), "1")
			fmt.Fprintf(w, "you sent: %s", auth)
			w.Header().Set("X-Trailer-Auth", auth)
			return
		case "/echo-stream": // the value split across two flushed chunks
			fmt.Fprint(w, "data: "+auth[:len(auth)/2])
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
			fmt.Fprint(w, auth[len(auth)/2:]+"\n\n")
			return
		case "/redirect":
			http.Redirect(w, r, "https://other.test.example/landing", http.StatusFound)
			return
		case "/ws":
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			_, _ = io.Copy(conn, brw) // echo until the client closes
			return
		case "/hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			fmt.Fprint(w, "final")
			return
		case "/echo":
			// Streamed back in two chunks: bodies both ways pass intact.
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "n=%d;", n)
			w.(http.Flusher).Flush()
			fmt.Fprint(w, "end")
			return
		}
		// What arrived, told without echoing it (echoes are scrubbed).
		fmt.Fprintf(w, "host=%s injected=%v forged=%v none=%v", r.Host, auth == "Bearer "+canary, strings.Contains(auth, "forged"), auth == "")
	})
	hs := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{e.pki.cert}}}
	ln := up.listen(t, "443")
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })

	ca, err := egress.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.ca = ca
	upAddr := netip.MustParseAddr(up.addr)
	e.srv = egress.New(egress.Options{
		Logger:        log,
		Resolver:      &egress.Resolver{Static: map[string][]netip.Addr{"api.test.example": {upAddr}, "other.test.example": {upAddr}}, Upstream: "127.0.0.1:9"},
		Permitted:     []netip.Prefix{up.permit},
		CA:            ca,
		UpstreamRoots: e.pki.pool,
		// The lookup is asked for the sandbox whose rule names the
		// secret: its owner's secret is the only one it may use.
		Secret: func(sandbox, name string) (string, error) {
			if sandbox != "injtest1" || name != "tok" {
				return "", fmt.Errorf("sandbox %s's secret %q: not found", sandbox, name)
			}
			return canary, nil
		},
		OnRefuse: func(r egress.Refusal) {
			e.mu.Lock()
			e.refuse = append(e.refuse, r)
			e.mu.Unlock()
		},
	})
	t.Cleanup(e.srv.Close)
	mgr, err := netns.New(context.Background(), netns.Options{
		StateDir: t.TempDir(), Range: testRange(t, 3), Logger: log,
		Ports: netns.Ports{Proxy: egress.ProxyPort, Transparent: egress.TransparentPort, DNS: egress.DNSPort},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	link, err := mgr.Setup(context.Background(), "injtest1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Teardown(context.Background(), "injtest1") })
	e.link = link
	pol, err := egress.NormalizePolicy(egress.Policy{
		Allow:  []string{"api.test.example", "other.test.example"},
		Inject: []egress.Injection{{Host: "api.test.example", Header: "Authorization", Value: "Bearer {{secret:tok}}"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Attach("injtest1", link.Gateway, link.Addr, pol); err != nil {
		t.Fatal(err)
	}
	return e
}

// client is a program in the sandbox trusting roots; with proxy it uses
// HTTPS_PROXY, otherwise it connects straight (the transparent proxy).
func (e *injEnv) client(t testing.TB, roots *x509.CertPool, proxy bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	if proxy {
		pu, _ := url.Parse(fmt.Sprintf("http://%s:%d", e.link.Gateway, egress.ProxyPort))
		tr.Proxy = http.ProxyURL(pu)
		tr.DialContext = dialFrom(t, e.link.NetNS)
	} else {
		// The names resolve to the upstream's address, as the sandbox's
		// resolver would answer; the firewall redirects port 443.
		d := dialFrom(t, e.link.NetNS)
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return d(ctx, network, net.JoinHostPort(e.up.addr, port))
		}
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (e *injEnv) paddockRoots(t testing.TB) *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(e.ca.CertPEM()) {
		t.Fatal("CA PEM")
	}
	return p
}

func TestInjection(t *testing.T) {
	e := newInjEnv(t)
	paddock := e.paddockRoots(t)
	for _, proxy := range []bool{true, false} {
		name := map[bool]string{true: "proxy", false: "transparent"}[proxy]
		t.Run(name, func(t *testing.T) {
			c := e.client(t, paddock, proxy)
			resp, err := c.Get("https://api.test.example/x")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := "injected=true"; !strings.Contains(string(b), want) {
				t.Fatalf("upstream answered %q, want %s", b, want)
			}
			if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != e.ca.Name() {
				t.Fatalf("intercepted host's certificate issued by %q, want the egress CA", issuer)
			}
			if got := resp.TLS.NegotiatedProtocol; got != "" && got != "http/1.1" {
				t.Fatalf("ALPN %q", got)
			}

			// A sandbox-sent value is replaced, not kept beside the injected one.
			req, _ := http.NewRequest("GET", "https://api.test.example/mine", nil)
			req.Header.Set("Authorization", "Bearer forged")
			resp, err = c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), "injected=true forged=false") {
				t.Fatalf("sandbox's own header not replaced: %q", b)
			}

			// Hosts without rules are spliced: the client sees the
			// upstream's own certificate and no header is added.
			plain := e.client(t, e.pki.pool, proxy)
			resp, err = plain.Get("https://other.test.example/y")
			if err != nil {
				t.Fatalf("host without rules not passed through untouched: %v", err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != e.pki.name || !strings.Contains(string(b), "none=true") {
				t.Fatalf("other host: issuer %q body %q", issuer, b)
			}

			// The proxy does not follow redirects: the second host gets the
			// client's own request, without the first host's header.
			resp, err = c.Get("https://api.test.example/redirect")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusFound || loc != "https://other.test.example/landing" {
				t.Fatalf("redirect: %d %q", resp.StatusCode, loc)
			}
			both := e.client(t, poolOf(e.pki.pool, e.ca), proxy)
			resp, err = both.Get(loc)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for _, r := range e.requests() {
				if strings.HasPrefix(r, "other.test.example ") && strings.Contains(r, canary) {
					t.Fatalf("redirect target received the injected header: %q", r)
				}
			}
		})
	}

	t.Run("request and streamed response bodies pass intact", func(t *testing.T) {
		c := e.client(t, paddock, true)
		for range 3 { // on one kept-alive connection
			resp, err := c.Post("https://api.test.example/echo", "application/octet-stream", strings.NewReader(strings.Repeat("z", 300<<10)))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != fmt.Sprintf("n=%d;end", 300<<10) {
				t.Fatalf("got %q", b)
			}
		}
	})

	t.Run("expect-continue and informational responses", func(t *testing.T) {
		c := e.client(t, paddock, true)
		tr := c.Transport.(*http.Transport)
		tr.ExpectContinueTimeout = time.Minute // longer than the client's timeout: a 100 must come
		c.Timeout = 10 * time.Second
		req, _ := http.NewRequest("POST", "https://api.test.example/echo", strings.NewReader("payload"))
		req.Header.Set("Expect", "100-continue")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "n=7;end" {
			t.Fatalf("expect-continue: %q", b)
		}
		resp, err = c.Get("https://api.test.example/hints")
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "final" {
			t.Fatalf("after early hints: %d %q", resp.StatusCode, b)
		}
	})

	t.Run("an upgraded connection is spliced after the handshake", func(t *testing.T) {
		raw, err := dialFrom(t, e.link.NetNS)(context.Background(), "tcp", fmt.Sprintf("%s:%d", e.link.Gateway, egress.ProxyPort))
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(15 * time.Second))
		fmt.Fprintf(raw, "CONNECT api.test.example:443 HTTP/1.1\r\nHost: api.test.example:443\r\n\r\n")
		br := bufio.NewReader(raw)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		tc := tls.Client(raw, &tls.Config{ServerName: "api.test.example", RootCAs: paddock})
		fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: api.test.example\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		tbr := bufio.NewReader(tc)
		resp, err := http.ReadResponse(tbr, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		fmt.Fprint(tc, "ping")
		got := make([]byte, 4)
		if _, err := io.ReadFull(tbr, got); err != nil || string(got) != "ping" {
			t.Fatalf("echo: %q %v", got, err)
		}
	})

	t.Run("an upstream that echoes the request does not hand back the secret", func(t *testing.T) {
		c := e.client(t, paddock, true)
		mask := "Bearer " + strings.Repeat("*", len(canary))
		for _, path := range []string{"/echo-headers", "/echo-stream"} {
			resp, err := c.Get("https://api.test.example" + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var dump strings.Builder
			_ = resp.Header.Write(&dump)
			_ = resp.Trailer.Write(&dump)
			dump.Write(b)
			if strings.Contains(dump.String(), canary) {
				t.Fatalf("%s: the secret came back:\n%s", path, dump.String())
			}
			if !strings.Contains(string(b), mask) {
				t.Fatalf("%s: body %q, want the echo masked as %q", path, b, mask)
			}
			if path == "/echo-headers" && (resp.Header.Get("X-Echo-Auth") != mask || resp.Trailer.Get("X-Trailer-Auth") != mask) {
				t.Fatalf("headers %v trailers %v", resp.Header, resp.Trailer)
			}
		}
		// The upstream did get the secret: the masking is on the way back.
		if got := e.requests(); !strings.Contains(strings.Join(got, "\n"), "/echo-stream Bearer "+canary) {
			t.Fatalf("upstream saw %v", got)
		}
	})

	t.Run("TRACE is refused on an intercepted host", func(t *testing.T) {
		c := e.client(t, paddock, true)
		for _, m := range []string{"TRACE", "TRACK"} {
			req, _ := http.NewRequest(m, "https://api.test.example/trace-me", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(b), m+" is refused") || strings.Contains(string(b), canary) {
				t.Fatalf("%s: %d %q", m, resp.StatusCode, b)
			}
		}
		for _, r := range e.requests() {
			if strings.Contains(r, "/trace-me") {
				t.Fatalf("the upstream received %q", r)
			}
		}
	})

	t.Run("host mismatch inside an intercepted connection", func(t *testing.T) {
		c := e.client(t, paddock, true)
		req, _ := http.NewRequest("GET", "https://api.test.example/", nil)
		req.Host = "other.test.example"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Paddock-Egress-Rule") != "host-mismatch" {
			t.Fatalf("got %d %q", resp.StatusCode, resp.Header.Get("X-Paddock-Egress-Rule"))
		}
	})

	t.Run("an injection does not allow its host", func(t *testing.T) {
		pol, _ := egress.NormalizePolicy(egress.Policy{
			Allow:  []string{"other.test.example"},
			Inject: []egress.Injection{{Host: "api.test.example", Header: "Authorization", Value: "Bearer {{secret:tok}}"}},
		})
		e.srv.SetPolicy("injtest1", pol)
		t.Cleanup(func() {
			pol, _ := egress.NormalizePolicy(egress.Policy{
				Allow:  []string{"api.test.example", "other.test.example"},
				Inject: []egress.Injection{{Host: "api.test.example", Header: "Authorization", Value: "Bearer {{secret:tok}}"}},
			})
			e.srv.SetPolicy("injtest1", pol)
		})
		if _, err := e.client(t, paddock, true).Get("https://api.test.example/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Fatalf("got %v, want a refused CONNECT", err)
		}
	})

	t.Run("upstream failing verification gets no header", func(t *testing.T) {
		pol, _ := egress.NormalizePolicy(egress.Policy{
			Allow:  []string{"api.test.example", "other.test.example"},
			Inject: []egress.Injection{{Host: "api.test.example", Header: "Authorization", Value: "Bearer {{secret:tok}}"}},
		})
		e.srv.Detach("injtest1")
		strict := egress.New(egress.Options{
			Resolver:      &egress.Resolver{Static: map[string][]netip.Addr{"api.test.example": {netip.MustParseAddr(e.up.addr)}}, Upstream: "127.0.0.1:9"},
			Permitted:     []netip.Prefix{e.up.permit},
			CA:            e.ca,
			UpstreamRoots: x509.NewCertPool(), // trusts nothing: the upstream is an impostor
			Secret:        func(string, string) (string, error) { return canary, nil },
		})
		if err := strict.Attach("injtest1", e.link.Gateway, e.link.Addr, pol); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			strict.Close()
			if err := e.srv.Attach("injtest1", e.link.Gateway, e.link.Addr, pol); err != nil {
				t.Error(err)
			}
		})
		resp, err := e.client(t, paddock, true).Get("https://api.test.example/impostor")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", resp.StatusCode)
		}
		for _, r := range e.requests() {
			if strings.Contains(r, "/impostor") {
				t.Fatalf("unverified upstream received the request: %q", r)
			}
		}
	})
}

func poolOf(p *x509.CertPool, ca *egress.CA) *x509.CertPool {
	q := p.Clone()
	q.AppendCertsFromPEM(ca.CertPEM())
	return q
}

func TestCAFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := egress.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "egress-ca-key.pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, err := egress.LoadOrCreateCA(dir)
	if err != nil || string(again.CertPEM()) != string(ca.CertPEM()) {
		t.Fatalf("reload gave another CA: %v", err)
	}
	if !strings.HasPrefix(ca.Name(), "Paddock egress CA ") {
		t.Fatalf("name %q", ca.Name())
	}
	leaf, err := ca.Leaf("api.test.example")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.test.example", Roots: roots}); err != nil {
		t.Fatalf("leaf does not verify: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: roots}); err == nil {
		t.Fatal("leaf verifies for another name")
	}
	if d := time.Until(leaf.Leaf.NotAfter); d > 25*time.Hour {
		t.Fatalf("leaf valid for %s", d)
	}
	if c2, _ := ca.Leaf("api.test.example"); c2 != leaf {
		t.Fatal("leaf not cached")
	}
	// Path length 0: the CA signs leaves, never another CA.
	blk, _ := pem.Decode(ca.CertPEM())
	caCert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || !caCert.IsCA || caCert.MaxPathLen != 0 || !caCert.MaxPathLenZero {
		t.Fatalf("CA constraints: %v %+v", err, caCert)
	}
	if leaf.Leaf.IsCA {
		t.Fatal("leaf is a CA")
	}
}

// BenchmarkInterception compares one small HTTPS request through the proxy
// to the same upstream when intercepted (api.test.example has an injection
// rule) and when spliced (other.test.example has none), on a kept-alive
// tunnel and with a new connection per request. Run as root:
//
//	go test -run XXX -bench Interception ./internal/egress
func BenchmarkInterception(b *testing.B) {
	e := newInjEnv(b)
	roots := poolOf(e.pki.pool, e.ca)
	for _, c := range []struct{ name, url string }{
		{"splice", "https://other.test.example/small"},
		{"intercept", "https://api.test.example/small"},
	} {
		for _, keep := range []bool{true, false} {
			name := c.name + map[bool]string{true: "-keepalive", false: "-newconn"}[keep]
			b.Run(name, func(b *testing.B) {
				cl := e.client(b, roots, true)
				cl.Transport.(*http.Transport).DisableKeepAlives = !keep
				for b.Loop() {
					resp, err := cl.Get(c.url)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
}
