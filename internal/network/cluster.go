package network

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// ClusterOptions configure OpenCluster.
type ClusterOptions struct {
	StateDir string
	Config   config.Network
	Logger   *slog.Logger
	Secrets  Revealer
	Record   func(ctx context.Context, sandbox string, e api.LedgerEntry) error
	// Listen is where the shared egress proxy listens (IP:PORT, port 0
	// picks one); the sandboxes' pods dial the address it gets, so the IP
	// must be one they reach (the node's, for a daemon on a node).
	Listen string
	// Apply changes what a running sandbox's pod may reach after its
	// rules changed (the backend's NetworkPolicy), and where its pod
	// finds the proxy after the proxy's address changed; nil, the change
	// applies at its next start.
	Apply func(ctx context.Context, id string, e runtime.Egress) error
	// Relay, when set, is the address (IP:PORT) in each pod that the
	// sandboxes' proxy variables name instead of Listen: a relay there
	// (the pod's agent) forwards to the proxy's current address, so a
	// daemon that comes back at another address (in a pod of its own)
	// keeps its running sandboxes' egress.
	Relay string
	// RetryEvery is how often a sandbox whose pod could not be pointed
	// at the proxy's new address is tried again (default 30 s).
	RetryEvery time.Duration
}

// Cluster implements controller.Network for sandboxes on a cluster: their
// pods have the cluster's network, which the backend narrows (a
// NetworkPolicy) to one shared egress proxy in the daemon and the
// addresses their address rules allow. Each sandbox authenticates to the
// proxy with a token of its own, kept beside its policy; its HTTP_PROXY
// variables carry it. There is no transparent proxy and no DNS: a
// program that ignores HTTP_PROXY reaches only the allowed addresses.
type Cluster struct {
	base
	ln    net.Listener
	addr  netip.AddrPort
	relay string
	apply func(ctx context.Context, id string, e runtime.Egress) error
	done  chan error

	// unpointed are the sandboxes whose pointing at the proxy's address
	// failed, tried again every retryEvery until it passes or they go.
	mu         sync.Mutex
	unpointed  map[string]bool
	retryEvery time.Duration
	stop       chan struct{}
	stopped    chan struct{}
}

var (
	_ controller.Network       = (*Cluster)(nil)
	_ controller.FirewallNamer = (*Cluster)(nil)
)

// Firewall says what confines the sandboxes, for `paddock info`: the
// cluster's NetworkPolicies, and where their proxy is.
func (c *Cluster) Firewall() string { return "networkpolicy, proxy " + c.addr.String() }

// OpenCluster starts the shared egress proxy.
func OpenCluster(o ClusterOptions) (*Cluster, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ap, err := netip.ParseAddrPort(o.Listen)
	if err != nil || !ap.Addr().Is4() || ap.Addr().IsUnspecified() {
		return nil, fmt.Errorf("egress proxy for the cluster %q: want IPV4:PORT, an address the pods reach (not 0.0.0.0): %w", o.Listen, errdefs.ErrInvalidArgument)
	}
	if o.Relay != "" {
		if rp, err := netip.ParseAddrPort(o.Relay); err != nil || !rp.Addr().IsLoopback() {
			return nil, fmt.Errorf("egress relay %q: want a loopback IP:PORT: %w", o.Relay, errdefs.ErrInvalidArgument)
		}
	}
	dir := filepath.Join(o.StateDir, "network")
	if err := os.MkdirAll(filepath.Join(dir, "policies"), 0o700); err != nil {
		return nil, err
	}
	ca, roots, err := openInterception(dir, o.Config.UpstreamCA) // inject.go
	if err != nil {
		return nil, err
	}
	srv := newEgressServer(log, o.Config, nil, ca, roots, o.Secrets, o.Record) // network.go
	ln, err := net.Listen("tcp4", ap.String())
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("egress proxy for the cluster: %w", err)
	}
	c := &Cluster{
		base: base{log: log, srv: srv, dir: dir, ca: ca, sec: o.Secrets},
		ln:   ln, addr: ln.Addr().(*net.TCPAddr).AddrPort(), relay: o.Relay, apply: o.Apply, done: make(chan error, 1),
		unpointed: map[string]bool{}, retryEvery: cmp.Or(o.RetryEvery, 30*time.Second),
		stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	c.addr = netip.AddrPortFrom(ap.Addr(), c.addr.Port())
	go func() { c.done <- srv.ServeShared(ln) }()
	go c.retryPointing()
	log.Info("egress proxy for the cluster's pods", "addr", c.addr.String())
	return c, nil
}

// Addr is where the pods reach the proxy.
func (c *Cluster) Addr() netip.AddrPort { return c.addr }

// Close stops the proxy; the sandboxes' policies stay for the next daemon.
func (c *Cluster) Close() {
	close(c.stop)
	<-c.stopped
	c.ln.Close()
	c.srv.Close()
	if err := <-c.done; err != nil {
		c.log.Warn("egress proxy for the cluster", "err", err)
	}
}

func (c *Cluster) tokenPath(id string) string {
	return filepath.Join(c.dir, "policies", id+".proxy-token")
}

// pointedPath records the proxy address the sandbox's pod was last
// given: when it is not the proxy's address now, the next prepare
// (a daemon restart's, or a start's) points the pod at it.
func (c *Cluster) pointedPath(id string) string {
	return filepath.Join(c.dir, "policies", id+".proxy-addr")
}

// pointAt makes sure the sandbox's pod finds the proxy where it is now.
// A new sandbox's pod is made with it; one the daemon had before is
// given it through the backend when the proxy moved since.
func (c *Cluster) pointAt(ctx context.Context, id string, pol api.NetworkPolicy, isNew bool) error {
	now := c.addr.String()
	if !isNew && c.apply != nil {
		b, err := os.ReadFile(c.pointedPath(id))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if strings.TrimSpace(string(b)) == now {
			return nil
		}
		if err := c.apply(ctx, id, *c.egressOf(pol)); err != nil {
			c.mu.Lock()
			c.unpointed[id] = true
			c.mu.Unlock()
			return fmt.Errorf("point the sandbox's pod at the egress proxy's address %s: %w", now, err)
		}
		c.log.Info("sandbox's pod pointed at the egress proxy's new address", "sandbox", id, "proxy", now)
	}
	// Under mu, as Release's removal: a sandbox released meanwhile gets
	// no record back.
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.unpointed, id)
	if _, err := os.Stat(c.policyPath(id)); err != nil {
		return nil
	}
	tmp := c.pointedPath(id) + ".tmp"
	if err := os.WriteFile(tmp, []byte(now), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.pointedPath(id))
}

// retryPointing tries the sandboxes whose pointing failed again (a pod
// that did not answer while the daemon started, the API server away)
// until Close: a running sandbox is not started again to get it.
func (c *Cluster) retryPointing() {
	defer close(c.stopped)
	t := time.NewTicker(c.retryEvery)
	defer t.Stop()
	// A Close ends a try under way too.
	base, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	go func() {
		select {
		case <-c.stop:
			cancelAll()
		case <-base.Done():
		}
	}()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.mu.Lock()
		ids := make([]string, 0, len(c.unpointed))
		for id := range c.unpointed {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		for _, id := range ids {
			pol, ok := c.Policy(id)
			if !ok {
				c.mu.Lock()
				delete(c.unpointed, id)
				c.mu.Unlock()
				continue
			}
			ctx, cancel := context.WithTimeout(base, c.retryEvery)
			if err := c.pointAt(ctx, id, pol, false); err != nil {
				c.log.Warn("sandbox's pod still not pointed at the egress proxy", "sandbox", id, "err", err)
			}
			cancel()
		}
	}
}

// token is the sandbox's proxy credential, made at its first prepare and
// kept for its life, so its pods' HTTP_PROXY stays right across daemon
// restarts.
func (c *Cluster) token(id string) (string, error) {
	b, err := os.ReadFile(c.tokenPath(id))
	if err == nil && len(strings.TrimSpace(string(b))) == 64 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	t := hex.EncodeToString(raw)
	tmp := c.tokenPath(id) + ".tmp"
	if err := os.WriteFile(tmp, []byte(t), 0o600); err != nil {
		return "", err
	}
	return t, os.Rename(tmp, c.tokenPath(id))
}

func (c *Cluster) egressOf(p api.NetworkPolicy) *runtime.Egress {
	return &runtime.Egress{Proxy: c.addr, Direct: c.srv.DirectRoutes(toEgress(p))}
}

func (c *Cluster) Prepare(ctx context.Context, id string, p *api.NetworkPolicy) (controller.NetSetup, error) {
	pol, err := c.recordedPolicy(id, p) // network.go
	if err != nil {
		return controller.NetSetup{}, err
	}
	tok, err := c.token(id)
	if err != nil {
		return controller.NetSetup{}, fmt.Errorf("sandbox %s proxy token: %w", id, err)
	}
	if err := c.srv.AttachShared(id, tok, toEgress(pol)); err != nil {
		return controller.NetSetup{}, err
	}
	if c.relay != "" {
		if err := c.pointAt(ctx, id, pol, p != nil); err != nil {
			return controller.NetSetup{}, fmt.Errorf("sandbox %s: %w", id, err)
		}
	}
	proxy := (&url.URL{Scheme: "http", User: url.UserPassword(id, tok), Host: cmp.Or(c.relay, c.addr.String())}).String()
	noProxy := "localhost,127.0.0.1,::1"
	return controller.NetSetup{
		Env:         append([]string{"NO_PROXY=" + noProxy, "no_proxy=" + noProxy}, trustEnv()...), // inject.go
		SecretEnv:   proxyEnv(proxy),                                                               // network.go
		Egress:      c.egressOf(pol),
		CACert:      c.ca.CertPEM(),
		TrustBundle: c.trustPath(id),
	}, nil
}

func (c *Cluster) SetPolicy(ctx context.Context, id string, p api.NetworkPolicy) error {
	if _, ok := c.Policy(id); !ok {
		return fmt.Errorf("sandbox %s has no network: %w", id, errdefs.ErrConflict)
	}
	// The pod's reach and the proxy's rules change together, the reach
	// first: if the cluster refuses, nothing has changed. A sandbox whose
	// pod is not running gets its reach at its next start.
	if c.apply != nil {
		if err := c.apply(ctx, id, *c.egressOf(p)); err != nil {
			return err
		}
	}
	if err := c.writePolicy(id, p); err != nil {
		return err
	}
	c.srv.SetPolicy(id, toEgress(p))
	return nil
}

func (c *Cluster) Release(ctx context.Context, id string) error {
	if !sandboxIDRE.MatchString(id) {
		return nil
	}
	c.srv.Detach(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.unpointed, id)
	var err error
	for _, p := range []string{c.policyPath(id), c.tokenPath(id), c.trustPath(id), c.pointedPath(id)} {
		if rerr := os.Remove(p); rerr != nil && !os.IsNotExist(rerr) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func (c *Cluster) List() []string { return c.policyIDs() }
