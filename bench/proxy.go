package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ItemProxy measures the egress proxy against a direct connection from the
// same network namespace.
const ItemProxy = "proxy"

// The proxy item's upstream: a host in a network namespace this harness
// makes, on a /30 of the benchmarking range (198.18.0.0/15) that the private daemon
// is told to permit (PADDOCK_EGRESS_PERMIT) and to resolve
// (PADDOCK_EGRESS_DNS_STATIC). A second /30 links the sandbox's namespace
// straight to the upstream for the direct baseline.
const (
	proxyUpstreamHost = "upstream.bench.test"
	proxyHostSide     = "198.19.254.1/30"
	proxyUpstreamAddr = "198.19.254.2"
	proxyPermit       = "198.19.254.0/30"
	proxyDirectSbx    = "198.19.254.5/30"
	proxyDirectUp     = "198.19.254.6"
	proxyBigBytes     = 256 << 20
	proxySmallBytes   = 1024
)

// proxyDaemonEnv is what a private daemon needs for the proxy item.
func proxyDaemonEnv() map[string]string {
	return map[string]string{
		"PADDOCK_EGRESS_PERMIT":     proxyPermit,
		"PADDOCK_EGRESS_DNS_STATIC": proxyUpstreamHost + "=" + proxyUpstreamAddr,
	}
}

// measureProxy compares, from one sandbox's network namespace, requests
// through Paddock's egress proxy with the same requests over a veth
// straight to the upstream: small requests on new and kept-alive
// connections, HTTPS through CONNECT, and 256 MiB downloads.
func (s *Suite) measureProxy(ctx context.Context) ([]Comparison, []Figure) {
	ids := []struct{ id, title string }{
		{"proxy-http-new", "Proxy: HTTP GET of 1 KiB, a new connection each time (runc)"},
		{"proxy-http-keepalive", "Proxy: HTTP GET of 1 KiB on a kept-alive connection (runc)"},
		{"proxy-https-new", "Proxy: HTTPS GET of 1 KiB through CONNECT, a new connection each time (runc)"},
		{"proxy-http-256m", "Proxy: HTTP GET of 256 MiB (runc)"},
		{"proxy-https-256m", "Proxy: HTTPS GET of 256 MiB through CONNECT (runc)"},
	}
	names := []string{"through the egress proxy", "direct, same namespace"}
	fail := func(err error) ([]Comparison, []Figure) {
		var cs []Comparison
		for _, x := range ids {
			cs = append(cs, failedComparison(x.id, x.title, err, names...))
		}
		return cs, nil
	}
	if !s.o.OwnDaemon {
		return fail(errors.New("needs the harness's private daemon (it permits the bench upstream's address); run without -socket"))
	}
	up, err := startProxyUpstream(ctx, fmt.Sprintf("pdbench-up-%d", os.Getpid()), fmt.Sprintf("pbu%d", os.Getpid()%1000000))
	if err != nil {
		return fail(fmt.Errorf("upstream: %w", err))
	}
	defer up.close()
	sb, err := s.c.Create(ctx, api.CreateSandboxRequest{
		Image: "busybox", Runtime: api.RuntimeRunc, KeepAlive: true,
		Labels:  map[string]string{runLabel: s.label},
		Network: &api.NetworkPolicy{Mode: "egress", AllowHosts: []string{proxyUpstreamHost}},
	})
	if err != nil {
		return fail(err)
	}
	defer s.destroy(ctx, sb.ID)
	gw, nsPath, err := s.sandboxNet(ctx, sb.ID)
	if err != nil {
		return fail(err)
	}
	direct, err := up.linkDirect(ctx, nsPath, fmt.Sprintf("pbd%d", os.Getpid()%1000000))
	if err != nil {
		return fail(fmt.Errorf("direct link: %w", err))
	}
	defer direct()

	dial := nsDialer(nsPath)
	proxyURL := &url.URL{Scheme: "http", Host: net.JoinHostPort(gw, "3128")}
	tlsConf := &tls.Config{RootCAs: up.pool}
	viaProxy := func(keepAlive bool) *http.Client {
		return &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyURL(proxyURL), DialContext: dial, TLSClientConfig: tlsConf,
			DisableKeepAlives: !keepAlive, DisableCompression: true,
		}}
	}
	straight := func(keepAlive bool) *http.Client {
		return &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				_, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				return dial(ctx, network, net.JoinHostPort(proxyDirectUp, port))
			},
			TLSClientConfig: tlsConf, DisableKeepAlives: !keepAlive, DisableCompression: true,
		}}
	}
	get := func(c *http.Client, scheme string, size int64) func(context.Context) (time.Duration, error) {
		u := fmt.Sprintf("%s://%s/bytes/%d", scheme, proxyUpstreamHost, size)
		return func(ctx context.Context) (time.Duration, error) {
			return Timed(func() error { return fetchExactly(ctx, c, u, size) })
		}
	}
	pair := func(a, b func(context.Context) (time.Duration, error)) []Variant {
		return []Variant{{Name: names[0], Run: a}, {Name: names[1], Run: b}}
	}
	pk, sk := viaProxy(true), straight(true)
	big := InterleaveOptions{Iterations: max(1, min(s.o.Iterations, 5)), Warmup: min(s.o.Warmup, 1), Timeout: 3 * time.Minute, Logger: s.log}
	series := [][]Series{
		s.interleaveN(ctx, ItemProxy, pair(get(viaProxy(false), "http", proxySmallBytes), get(straight(false), "http", proxySmallBytes))),
		s.interleaveN(ctx, ItemProxy, pair(get(pk, "http", proxySmallBytes), get(sk, "http", proxySmallBytes))),
		s.interleaveN(ctx, ItemProxy, pair(get(viaProxy(false), "https", proxySmallBytes), get(straight(false), "https", proxySmallBytes))),
		Interleave(ctx, big, pair(get(pk, "http", proxyBigBytes), get(sk, "http", proxyBigBytes))),
		Interleave(ctx, big, pair(get(pk, "https", proxyBigBytes), get(sk, "https", proxyBigBytes))),
	}
	note := "Both variants run in the harness, with sockets made in the sandbox's network namespace: one through the sandbox's egress proxy " +
		"(HTTP_PROXY on its gateway: an absolute-URI request for HTTP, CONNECT for HTTPS, spliced since no credential rule names the host), " +
		"the other over a second veth from that namespace straight to the same upstream (a Go HTTP server in a namespace of its own). " +
		"The proxied path also crosses the host's stack twice and is resolved by the daemon's resolver."
	var cs []Comparison
	for i, x := range ids {
		cs = append(cs, NewComparison(x.id, x.title, note, series[i]))
	}
	var figs []Figure
	for i, scheme := range []string{"HTTP", "HTTPS"} {
		ser := series[3+i]
		if a := ser[0].Summary; a.N > 0 {
			f := Figure{ID: fmt.Sprintf("proxy-throughput-%s", strings.ToLower(scheme)), Name: fmt.Sprintf("Proxy throughput (%s GET of 256 MiB, p50)", scheme),
				Unit: "MiB/s", Value: mibps(proxyBigBytes, a.P50ms), Baseline: names[1]}
			if b := ser[1].Summary; b.N > 0 {
				f.BaseVal = mibps(proxyBigBytes, b.P50ms)
				f.Ratio = Ratio(f.Value, f.BaseVal)
			}
			figs = append(figs, f)
		}
	}
	return cs, figs
}

// fetchExactly GETs u and insists on 200 and exactly want bytes.
func fetchExactly(ctx context.Context, c *http.Client, u string, want int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n != want {
		return fmt.Errorf("GET %s: status %d, %d bytes (want 200, %d)", u, resp.StatusCode, n, want)
	}
	return nil
}

// sandboxNet finds a networked sandbox's gateway (from its proxy variable)
// and the path of its network namespace.
func (s *Suite) sandboxNet(ctx context.Context, id string) (gw, nsPath string, err error) {
	out, err := s.execOut(ctx, id, paddock.ExecOptions{Cmd: []string{"sh", "-c", "echo $HTTP_PROXY"}})
	if err != nil {
		return "", "", err
	}
	u, err := url.Parse(strings.TrimSpace(out))
	if err != nil || u.Hostname() == "" {
		return "", "", fmt.Errorf("sandbox's HTTP_PROXY is %q", strings.TrimSpace(out))
	}
	matches, _ := filepath.Glob("/run/netns/paddock-*-" + id)
	if len(matches) != 1 {
		return "", "", fmt.Errorf("network namespace of %s: found %v", id, matches)
	}
	return u.Hostname(), matches[0], nil
}

// proxyUpstream is an HTTP and HTTPS server in a namespace of its own,
// linked to the host by a veth.
type proxyUpstream struct {
	ns, hostIf string
	pool       *x509.CertPool
	servers    []*http.Server
}

func startProxyUpstream(ctx context.Context, ns, hostIf string) (*proxyUpstream, error) {
	u := &proxyUpstream{ns: ns, hostIf: hostIf}
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"addr", "add", proxyHostSide, "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", ns, "addr", "add", proxyUpstreamAddr + "/30", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for _, st := range steps {
		if err := ipCmd(ctx, st...); err != nil {
			u.close()
			return nil, err
		}
	}
	cert, pool, err := selfSigned(proxyUpstreamHost)
	if err != nil {
		u.close()
		return nil, err
	}
	u.pool = pool
	h := http.HandlerFunc(serveBytes)
	for _, l := range []struct {
		port string
		tls  bool
	}{{"80", false}, {"443", true}} {
		var ln net.Listener
		err := inNetns("/run/netns/"+ns, func() error {
			var err error
			ln, err = net.Listen("tcp", ":"+l.port)
			return err
		})
		if err != nil {
			u.close()
			return nil, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		u.servers = append(u.servers, srv)
		if l.tls {
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
		}
		go func() { _ = srv.Serve(ln) }()
	}
	return u, nil
}

// linkDirect joins a sandbox's namespace to the upstream's with a veth of
// their own, and returns its removal.
func (u *proxyUpstream) linkDirect(ctx context.Context, nsPath, name string) (func(), error) {
	sbxNS := filepath.Base(nsPath)
	remove := func() { _ = ipCmd(context.WithoutCancel(ctx), "-n", sbxNS, "link", "del", name) }
	steps := [][]string{
		{"link", "add", name, "netns", sbxNS, "type", "veth", "peer", "name", "direct0", "netns", u.ns},
		{"-n", sbxNS, "addr", "add", proxyDirectSbx, "dev", name},
		{"-n", sbxNS, "link", "set", name, "up"},
		{"-n", u.ns, "addr", "add", proxyDirectUp + "/30", "dev", "direct0"},
		{"-n", u.ns, "link", "set", "direct0", "up"},
	}
	for _, st := range steps {
		if err := ipCmd(ctx, st...); err != nil {
			remove()
			return nil, err
		}
	}
	return remove, nil
}

func (u *proxyUpstream) close() {
	for _, srv := range u.servers {
		_ = srv.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = ipCmd(ctx, "link", "del", u.hostIf)
	_ = ipCmd(ctx, "netns", "del", u.ns)
}

// serveBytes answers /bytes/N with N bytes (at most 1 GiB).
func serveBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/bytes/"), 10, 64)
	if err != nil || n < 0 || n > 1<<30 {
		http.Error(w, "want /bytes/N", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	buf := make([]byte, 256<<10)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNetns runs fn on a thread that has joined the network namespace at
// path. Sockets fn makes stay in that namespace wherever they are used
// later. A thread that cannot return to its own namespace is never reused.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("join %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		} // else the locked thread ends with this goroutine
		errc <- ferr
	}()
	return <-errc
}

// nsDialer dials from the network namespace at path.
func nsDialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(path, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// selfSigned makes a certificate for host and a pool that trusts it.
func selfSigned(host string) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}
