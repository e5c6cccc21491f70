package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Ports the egress services listen on, on each sandbox's gateway address.
const (
	ProxyPort       = 3128 // explicit proxy (HTTP_PROXY, HTTPS_PROXY)
	TransparentPort = 3129 // direct connections to 80/443, redirected by the firewall
	DNSPort         = 53
)

const (
	dialTimeout      = 10 * time.Second
	handshakeTimeout = 10 * time.Second
	maxHeaderBytes   = 64 << 10
)

// Refusal is one refused connection or request, reported to OnRefuse.
type Refusal struct {
	Sandbox string
	Host    string
	Port    int
	Rule    string
	Via     string // "proxy", "connect", "transparent", "dns", "rules-changed"
	// Repeats, when set, counts further refusals of the same destination,
	// rule and via in the window since the one recorded (limits.go).
	Repeats int
	// Others marks a count (Repeats) of refusals beyond the window's
	// budget of distinct destinations, not recorded one by one.
	Others bool
}

// Options configure a Server.
type Options struct {
	Logger   *slog.Logger
	Resolver *Resolver
	// Permitted are destination prefixes exempt from the forbidden ranges
	// (not from OwnRanges nor the host's own addresses).
	Permitted []netip.Prefix
	// OwnRanges are the daemon's own prefixes (its sandbox range): never a
	// destination, whatever Permitted says, so that no sandbox reaches
	// another's gateway through the proxy even in a public range.
	OwnRanges []netip.Prefix
	// OnRefuse is called for every refusal (the ledger); it must not block long.
	OnRefuse func(Refusal)
	// CA mints certificates for hosts with injection rules; nil: no
	// interception, every TLS connection is spliced.
	CA *CA
	// UpstreamRoots verify upstreams of intercepted connections (nil: the
	// system roots).
	UpstreamRoots *x509.CertPool
	// Secret returns the value of a secret an injection template of the
	// sandbox's rules names: the one the sandbox's owner keeps under that
	// name (secret names are per owner).
	Secret func(sandbox, name string) (string, error)
	// HandshakeTimeout bounds how long a client may take to send its
	// request headers, TLS ClientHello or a tunnel's first bytes
	// (default 10 s).
	HandshakeTimeout time.Duration
	// MaxConns bounds each sandbox's open connections to its proxy,
	// transparent and DNS-over-TCP listeners together (default 512).
	MaxConns int
	// MaxDNS bounds each sandbox's DNS queries in progress (default 64).
	MaxDNS int
	// RefusalWindow and RefusalBudget coalesce refusals: one record per
	// destination and window (default 10 s) with a repeat count, and at
	// most RefusalBudget (default 64) destinations recorded singly per
	// window (limits.go).
	RefusalWindow time.Duration
	RefusalBudget int
}

// Server runs the proxy and DNS services of every networked sandbox.
type Server struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	boxes  map[string]*box
	logLim *logLimit
	hosts  *hostAddrs // the host's own addresses (ranges.go)
	// sharedSrv are the shared proxy's servers (shared.go).
	sharedSrv []*http.Server
}

// box is one sandbox's listeners and current policy.
type box struct {
	id      string
	peer    netip.Addr // the sandbox's own address: the only client served
	token   string     // on the shared proxy: the sandbox's credential (shared.go)
	mu      sync.RWMutex
	policy  Policy
	closers []io.Closer
	wg      sync.WaitGroup
	conns   map[net.Conn]*admission // open connections (track.go)
	closed  bool
	grants  map[int][]string // temporary allow rules (per command)
	nextID  int

	refusals *refusalLog     // coalesces refusals (limits.go)
	connLim  *connLimit      // open connections on the TCP listeners
	dnsSem   chan struct{}   // DNS queries in progress
	tr       *http.Transport // upstream connections, this sandbox's alone
}

func (b *box) current() Policy {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(b.grants) == 0 {
		return b.policy
	}
	p := b.policy
	p.Allow = append([]string(nil), p.Allow...)
	for _, g := range b.grants {
		p.Allow = append(p.Allow, g...)
	}
	return p
}

// Grant adds allow rules (normalised globs) until revoke is called.
func (s *Server) Grant(id string, allow []string) (revoke func(), ok bool) {
	s.mu.Lock()
	b, ok := s.boxes[id]
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	b.mu.Lock()
	b.nextID++
	key := b.nextID
	b.grants[key] = append([]string(nil), allow...)
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.grants, key)
			b.mu.Unlock()
			s.recheck(b)
		})
	}, true
}

// New builds a Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Resolver == nil {
		opts.Resolver = &Resolver{}
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = handshakeTimeout
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = defaultMaxConns
	}
	if opts.MaxDNS <= 0 {
		opts.MaxDNS = defaultMaxDNS
	}
	if opts.RefusalWindow <= 0 {
		opts.RefusalWindow = defaultRefusalWindow
	}
	if opts.RefusalBudget <= 0 {
		opts.RefusalBudget = defaultRefusalBudget
	}
	s := &Server{opts: opts, log: opts.Logger, boxes: map[string]*box{}, logLim: newLogLimit(10 * time.Second)}
	s.hosts = &hostAddrs{list: interfaceAddrs, ttl: hostAddrTTL, onError: func(err error) {
		if s.logLim.allow("host-addrs") {
			s.log.Error("egress: cannot list the host's addresses; refusing every destination until it can", "err", err)
		}
	}}
	return s
}

// newTransport is a sandbox's own pool of upstream connections. Pools are
// never shared: a connection one sandbox opened (and any state an upstream
// ties to a connection, such as connection-based authentication) is never
// handed to another sandbox's request, and what a sandbox keeps open
// upstream ends with it.
func (s *Server) newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           s.dialFromContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
}

// errRefused carries the rule that refused a destination.
type errRefused struct{ rule string }

func (e *errRefused) Error() string { return "refused by rule " + e.rule }

// Attach starts a sandbox's services on its gateway address, serving only
// clients whose source address is peer, the sandbox's own. Attaching an
// attached sandbox only updates its policy.
func (s *Server) Attach(id string, gw, peer netip.Addr, p Policy) error {
	if !gw.IsValid() || !peer.IsValid() || gw == peer {
		return fmt.Errorf("egress attach %s: gateway %v and sandbox address %v must be two valid addresses", id, gw, peer)
	}
	p.Direct = s.DirectRoutes(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.boxes[id]; ok {
		b.mu.Lock()
		b.policy = p
		b.mu.Unlock()
		go s.recheck(b) // s.mu is held
		return nil
	}
	b := s.newBox(id, peer, p)
	fail := func(err error) error {
		for _, c := range b.closers {
			c.Close()
		}
		return err
	}
	proxyLn, err := net.Listen("tcp", netip.AddrPortFrom(gw, ProxyPort).String())
	if err != nil {
		return fail(fmt.Errorf("egress proxy listen: %w", err))
	}
	b.closers = append(b.closers, proxyLn)
	transLn, err := net.Listen("tcp", netip.AddrPortFrom(gw, TransparentPort).String())
	if err != nil {
		return fail(fmt.Errorf("egress transparent listen: %w", err))
	}
	b.closers = append(b.closers, transLn)
	proxyLn = s.guard(b, proxyLn, "proxy", ProxyPort, func(c net.Conn) { writeConnLimit(c, b.connLim.max) })
	transLn = s.guard(b, transLn, "transparent", TransparentPort, func(net.Conn) {})
	dnsClosers, err := s.serveDNS(b, gw)
	if err != nil {
		return fail(err)
	}
	b.closers = append(b.closers, dnsClosers...)
	hs := &http.Server{
		Handler: s.proxyHandler(b),
		// Each connection is the sandbox's to close on a rule change
		// (track.go); a hijacked one is tracked by the tunnel.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				b.track(c)
			case http.StateClosed, http.StateHijacked:
				b.untrack(c)
			}
		},
		ReadHeaderTimeout: s.opts.HandshakeTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	b.closers = append(b.closers, hs)
	b.wg.Add(2)
	go func() { defer b.wg.Done(); _ = hs.Serve(proxyLn) }()
	go func() { defer b.wg.Done(); s.serveTransparent(b, transLn) }()
	s.boxes[id] = b
	return nil
}

// SetPolicy replaces a sandbox's rules; new connections and lookups see
// them at once, and open connections the new rules refuse are closed.
func (s *Server) SetPolicy(id string, p Policy) bool {
	p.Direct = s.DirectRoutes(p)
	s.mu.Lock()
	b, ok := s.boxes[id]
	s.mu.Unlock()
	if ok {
		b.mu.Lock()
		b.policy = p
		b.mu.Unlock()
		s.recheck(b)
	}
	return ok
}

// Detach stops a sandbox's services.
func (s *Server) Detach(id string) {
	s.mu.Lock()
	b, ok := s.boxes[id]
	delete(s.boxes, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	for _, c := range b.closers {
		c.Close()
	}
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	b.tr.CloseIdleConnections()
	b.refusals.close()
}

// Close stops the shared proxy and detaches every sandbox.
func (s *Server) Close() {
	s.mu.Lock()
	shared := s.sharedSrv
	s.sharedSrv = nil
	s.mu.Unlock()
	for _, hs := range shared {
		hs.Close()
	}
	s.mu.Lock()
	ids := make([]string, 0, len(s.boxes))
	for id := range s.boxes {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.Detach(id)
	}
}

func (s *Server) newBox(id string, peer netip.Addr, p Policy) *box {
	return &box{
		id: id, peer: peer, policy: p, conns: map[net.Conn]*admission{}, grants: map[int][]string{},
		refusals: &refusalLog{window: s.opts.RefusalWindow, budget: s.opts.RefusalBudget, emit: s.record, id: id},
		connLim:  &connLimit{max: int64(s.opts.MaxConns)},
		dnsSem:   make(chan struct{}, s.opts.MaxDNS),
		tr:       s.newTransport(),
	}
}

// guard wraps a sandbox's TCP listener: only the sandbox's address is
// served (peer.go), and no more than its connection limit (limits.go);
// over answers a connection past the limit before it is closed.
func (s *Server) guard(b *box, ln net.Listener, name string, port int, over func(net.Conn)) net.Listener {
	return &limitListener{
		Listener: &peerListener{Listener: ln, peer: b.peer, drop: s.dropped(b, name)},
		limit:    b.connLim,
		over: func(c net.Conn) {
			over(c)
			s.refuse(b, "", port, ruleConnLimit, name)
		},
	}
}

// dropped logs (at debug, rate-limited) a connection or query that came
// from an address other than the sandbox's.
func (s *Server) dropped(b *box, listener string) func(net.Addr) {
	return func(from net.Addr) {
		if s.logLim.allow("drop/" + b.id + "/" + listener) {
			s.log.Debug("egress: dropped a client that is not the sandbox", "sandbox", b.id, "listener", listener, "from", from.String(), "want", b.peer.String())
		}
	}
}

// refuse records a refusal: logged and passed to OnRefuse, coalesced per
// destination and window (limits.go).
func (s *Server) refuse(b *box, host string, port int, rule, via string) {
	b.refusals.add(Refusal{Sandbox: b.id, Host: host, Port: port, Rule: rule, Via: via})
}

func (s *Server) record(r Refusal) {
	switch {
	case r.Others:
		s.log.Warn("egress refused, not recorded one by one", "sandbox", r.Sandbox, "count", r.Repeats)
	case r.Repeats > 0:
		s.log.Warn("egress refused again", "sandbox", r.Sandbox, "host", r.Host, "port", r.Port, "rule", r.Rule, "via", r.Via, "repeats", r.Repeats)
	default:
		s.log.Warn("egress refused", "sandbox", r.Sandbox, "host", r.Host, "port", r.Port, "rule", r.Rule, "via", r.Via)
	}
	if s.opts.OnRefuse != nil {
		s.opts.OnRefuse(r)
	}
}

// check applies rules and ports to a destination; it returns the refusing
// rule or "".
func (s *Server) check(b *box, host string, port int) string {
	return checkPolicy(b.current(), host, port)
}

func checkPolicy(p Policy, host string, port int) string {
	d := p.Decide(host)
	if !d.Allowed {
		return d.Rule
	}
	if !strings.HasPrefix(d.Rule, "allow-cidr:") && !p.PortAllowed(port) {
		return "port:" + strconv.Itoa(port)
	}
	return ""
}

// dialChecked resolves host with the daemon's resolver and connects to the
// first address outside the forbidden ranges.
//
// An IP literal is dialled as it is: callers reach here only once the
// rules allowed it, which for an address means an address rule did.
func (s *Server) dialChecked(ctx context.Context, host string, port int) (net.Conn, error) {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() == "" {
		addrs = []netip.Addr{ip}
	} else if addrs, err = s.opts.Resolver.Lookup(ctx, host); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	var lastErr error = &errRefused{rule: "forbidden-address"}
	d := net.Dialer{Timeout: dialTimeout}
	for _, a := range addrs {
		if s.forbiddenDst(a) {
			continue
		}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

type ctxKey struct{}

// dialFromContext lets the shared Transport dial only what the handler
// already checked: the host travels in the request's context.
func (s *Server) dialFromContext(ctx context.Context, _, addr string) (net.Conn, error) {
	host, portS, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if want, _ := ctx.Value(ctxKey{}).(string); want != addr {
		return nil, &errRefused{rule: "unchecked-destination"}
	}
	port, _ := strconv.Atoi(portS)
	return s.dialChecked(ctx, host, port)
}

func writeRefusal(w http.ResponseWriter, host string, port int, rule string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Paddock-Egress-Rule", rule)
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "paddock egress: %s refused by rule %s\n", net.JoinHostPort(host, strconv.Itoa(port)), rule)
}

func splitHostPort(hostport string, defPort int) (string, int, bool) {
	host, portS, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.Trim(hostport, "[]"), defPort, hostport != ""
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, false
	}
	return host, port, true
}

func (s *Server) proxyHandler(b *box) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			s.handleConnect(b, w, r)
			return
		}
		if !r.URL.IsAbs() || r.URL.Scheme != "http" {
			http.Error(w, "paddock egress: only absolute http:// URLs and CONNECT are proxied", http.StatusBadRequest)
			return
		}
		host, port, ok := splitHostPort(r.URL.Host, 80)
		if !ok {
			http.Error(w, "paddock egress: bad host", http.StatusBadRequest)
			return
		}
		release, rule := s.admit(b, host, port, connOf(r))
		if rule != "" {
			s.refuse(b, host, port, rule, "proxy")
			writeRefusal(w, host, port, rule)
			return
		}
		defer release()
		s.forward(b, w, r, host, port, "proxy", nil)
	})
}

// hopHeaders are per-connection and never forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopHeaders deletes a message's hop-by-hop fields: the standard
// ones, and every field its Connection (or Proxy-Connection) header names
// (RFC 9110, 7.6.1), which concern this connection only and must not be
// passed on by a proxy either way.
func removeHopHeaders(h http.Header) {
	for _, c := range []string{"Connection", "Proxy-Connection"} {
		for _, v := range h.Values(c) {
			for _, f := range strings.Split(v, ",") {
				if f = textproto.TrimString(f); f != "" {
					h.Del(f)
				}
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// forward sends a plain HTTP request upstream and relays the response.
// When hijack is set and the request asks to upgrade its connection (a
// WebSocket), the upgrade is passed on, and if the upstream switches
// protocols hijack gets the response and the upstream connection to
// splice with the sandbox's.
func (s *Server) forward(b *box, w http.ResponseWriter, r *http.Request, host string, port int, via string, hijack func(*http.Response, io.ReadWriteCloser)) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	out := r.Clone(context.WithValue(r.Context(), ctxKey{}, addr))
	out.RequestURI = ""
	out.URL.Scheme = "http"
	out.URL.Host = addr
	upgrade := ""
	if hijack != nil {
		upgrade = upgradeOf(r.Header)
	}
	removeHopHeaders(out.Header)
	if upgrade != "" {
		out.Header.Set("Connection", "Upgrade")
		out.Header.Set("Upgrade", upgrade)
	}
	resp, err := b.tr.RoundTrip(out)
	if err != nil {
		var ref *errRefused
		if errors.As(err, &ref) {
			s.refuse(b, host, port, ref.rule, via)
			writeRefusal(w, host, port, ref.rule)
			return
		}
		http.Error(w, "paddock egress: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		if upgrade == "" || !ok {
			resp.Body.Close()
			http.Error(w, "paddock egress: the upstream switched protocols unasked", http.StatusBadGateway)
			return
		}
		to := resp.Header.Get("Upgrade")
		removeHopHeaders(resp.Header)
		resp.Header.Set("Connection", "Upgrade")
		resp.Header.Set("Upgrade", to)
		hijack(resp, rwc)
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	copyFlushing(w, resp.Body)
}

// upgradeOf returns the protocol a request asks to upgrade its connection
// to (Connection: upgrade with an Upgrade field), or "".
func upgradeOf(h http.Header) string {
	to := h.Get("Upgrade")
	if to == "" {
		return ""
	}
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), "upgrade") {
				return to
			}
		}
	}
	return ""
}

// copyFlushing relays a response body, flushing after every read so that
// streamed responses (server-sent events, long polls) are not held in a
// buffer until it fills.
func copyFlushing(w http.ResponseWriter, r io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
