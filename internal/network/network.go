// Package network gives sandboxes their networks on the local backend: it
// implements controller.Network with the host plumbing of internal/netns
// (a namespace, a veth and firewall rules per sandbox) and the egress
// proxy and resolver of internal/egress, and keeps each sandbox's policy
// in a file beside its link record, so both outlive the daemon.
package network

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/netns"
)

// Options configure Open.
type Options struct {
	// StateDir is the daemon's state dir; the network's state (links,
	// policies, the interception CA) lives under StateDir/network.
	StateDir string
	// Config is the validated network configuration (config.Validate).
	Config config.Network
	Logger *slog.Logger
	// Secrets reveals the values injection rules name; nil, the daemon
	// keeps no secrets and injection rules are refused.
	Secrets Revealer
	// Record writes a sandbox's ledger entry: egress refusals end up
	// there. Nil, refusals only reach the log.
	Record func(ctx context.Context, sandbox string, e api.LedgerEntry) error
}

// Revealer opens the secret of a name that a sandbox's owner keeps
// (secretstore.Box).
type Revealer interface {
	RevealFor(sandbox, name string) (string, error)
}

// Manager implements controller.Network with netns plumbing and the
// egress server; each sandbox's policy is a file beside its link record.
type Manager struct {
	base
	mgr *netns.Manager
}

// base is what both networks (the host's, Manager, and a cluster's,
// Cluster) keep alike: the egress server, the policies' directory and
// the interception CA.
type base struct {
	log *slog.Logger
	srv *egress.Server
	dir string
	ca  *egress.CA // signs interception certificates (inject.go)
	sec Revealer   // injection templates' secrets
}

var (
	_ controller.Network       = (*Manager)(nil)
	_ controller.FirewallNamer = (*Manager)(nil)
)

// Firewall names the firewall backend in use, for `paddock info`.
func (n *Manager) Firewall() string { return n.mgr.Firewall() }

// refusalRecorder returns the egress server's OnRefuse: each refusal, or
// count of them, becomes a ledger entry of its sandbox.
func refusalRecorder(record func(context.Context, string, api.LedgerEntry) error) func(egress.Refusal) {
	return func(ref egress.Refusal) {
		if record == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = record(ctx, ref.Sandbox, RefusalEntry(ref))
	}
}

// RefusalEntry is the ledger entry of a refusal, or of a count of them
// (the proxy coalesces repeats per destination and window).
func RefusalEntry(ref egress.Refusal) api.LedgerEntry {
	if ref.Others {
		return api.LedgerEntry{
			Kind: api.LedgerEgressRefused,
			Note: fmt.Sprintf("%d more refusals of other destinations, not recorded one by one (rate limit)", ref.Repeats),
			Data: map[string]string{"repeats": strconv.Itoa(ref.Repeats), "others": "true"},
		}
	}
	dst := net.JoinHostPort(ref.Host, strconv.Itoa(ref.Port))
	note := fmt.Sprintf("%s refused by rule %s", dst, ref.Rule)
	data := map[string]string{"host": ref.Host, "port": strconv.Itoa(ref.Port), "rule": ref.Rule, "via": ref.Via}
	if ref.Repeats > 0 {
		note = fmt.Sprintf("%s refused by rule %s %d more times", dst, ref.Rule, ref.Repeats)
		data["repeats"] = strconv.Itoa(ref.Repeats)
	}
	return api.LedgerEntry{Kind: api.LedgerEgressRefused, Note: note, Data: data}
}

// Open sets up networking, or returns nil (mode none only) when the host
// cannot: networking is optional, its absence is logged.
func Open(ctx context.Context, o Options) (*Manager, error) {
	// A bad setting has failed the start (config.Validate); a host that
	// lacks what it needs only loses networking.
	nc, log := o.Config, o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := netns.Available(ctx, nc.Firewall); err != nil {
		log.Warn("egress networking unavailable", "err", err)
		return nil, nil
	}
	dir := filepath.Join(o.StateDir, "network")
	for _, d := range []string{dir, filepath.Join(dir, "links"), filepath.Join(dir, "policies")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	owner, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, err
	}
	mgr, err := netns.New(ctx, netns.Options{
		StateDir: filepath.Join(dir, "links"), Range: nc.Range, Logger: log, Firewall: nc.Firewall, Owner: owner,
		Ports: netns.Ports{Proxy: egress.ProxyPort, Transparent: egress.TransparentPort, DNS: egress.DNSPort},
	})
	if err != nil {
		return nil, fmt.Errorf("network plumbing: %w", err)
	}
	ca, roots, err := openInterception(dir, nc.UpstreamCA) // inject.go
	if err != nil {
		_ = mgr.Close(ctx) // gives the range up
		return nil, err
	}
	srv := newEgressServer(log, nc, []netip.Prefix{nc.Range}, ca, roots, o.Secrets, o.Record)
	return &Manager{base: base{log: log, srv: srv, dir: dir, ca: ca, sec: o.Secrets}, mgr: mgr}, nil
}

// newEgressServer is the egress server of both networks: the configured
// resolver, permitted and own ranges, connection limit, interception CA
// and secrets, refusals to the ledger through record.
func newEgressServer(log *slog.Logger, nc config.Network, own []netip.Prefix, ca *egress.CA, roots *x509.CertPool, sec Revealer, record func(context.Context, string, api.LedgerEntry) error) *egress.Server {
	var reveal func(sandbox, name string) (string, error)
	if sec != nil {
		reveal = sec.RevealFor
	}
	return egress.New(egress.Options{
		Logger:        log,
		Resolver:      &egress.Resolver{Static: nc.DNSStatic, Upstream: nc.DNSUpstream},
		Permitted:     nc.Permit,
		OwnRanges:     own,
		MaxConns:      nc.MaxConns,
		OnRefuse:      refusalRecorder(record),
		CA:            ca,
		UpstreamRoots: roots,
		Secret:        reveal,
	})
}

// Close stops the proxies; sandboxes keep their namespaces and rules
// (they outlive the daemon) but chains nobody uses are removed.
func (n *Manager) Close() {
	n.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.mgr.Close(ctx)
}

func (n *base) Validate(p api.NetworkPolicy) (api.NetworkPolicy, error) {
	np, err := egress.NormalizePolicy(toEgress(p))
	if err != nil {
		return api.NetworkPolicy{}, err
	}
	if err := n.srv.CheckDirect(np); err != nil {
		return api.NetworkPolicy{}, err
	}
	if err := n.checkSecrets(np.Inject); err != nil { // inject.go
		return api.NetworkPolicy{}, err
	}
	return api.NetworkPolicy{
		Mode: api.NetworkEgress, AllowHosts: np.Allow, DenyHosts: np.Deny, AllowCIDRs: np.AllowCIDR, DenyCIDRs: np.DenyCIDR,
		Ports: np.Ports, Inject: fromEgressInject(np.Inject),
	}, nil
}

var sandboxIDRE = lazyre.New(`^[a-z0-9]{1,32}$`)

func (n *base) policyPath(id string) string {
	return filepath.Join(n.dir, "policies", id+".json")
}

func (n *base) resolvPath(id string) string {
	return filepath.Join(n.dir, "policies", id+".resolv.conf")
}

func (n *base) Policy(id string) (api.NetworkPolicy, bool) {
	if !sandboxIDRE.MatchString(id) {
		return api.NetworkPolicy{}, false
	}
	b, err := os.ReadFile(n.policyPath(id))
	if err != nil {
		return api.NetworkPolicy{}, false
	}
	var p api.NetworkPolicy
	if json.Unmarshal(b, &p) != nil {
		return api.NetworkPolicy{}, false
	}
	return p, true
}

func (n *base) writePolicy(id string, p api.NetworkPolicy) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := n.policyPath(id) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, n.policyPath(id))
}

func toEgress(p api.NetworkPolicy) egress.Policy {
	return egress.Policy{
		Allow: p.AllowHosts, Deny: p.DenyHosts, AllowCIDR: p.AllowCIDRs, DenyCIDR: p.DenyCIDRs,
		Ports: p.Ports, Inject: toEgressInject(p.Inject),
	}
}

// recordedPolicy records p as id's policy when it is given, and returns
// the recorded one: Prepare's first step on both networks.
func (n *base) recordedPolicy(id string, p *api.NetworkPolicy) (api.NetworkPolicy, error) {
	if !sandboxIDRE.MatchString(id) {
		return api.NetworkPolicy{}, errdefs.Invalid("sandbox id %q", id)
	}
	if p != nil {
		if err := n.writePolicy(id, *p); err != nil {
			return api.NetworkPolicy{}, err
		}
	}
	pol, ok := n.Policy(id)
	if !ok {
		return api.NetworkPolicy{}, errors.New("no network policy recorded")
	}
	return pol, nil
}

// policyIDs are the sandboxes with a recorded policy.
func (n *base) policyIDs() []string {
	ents, _ := os.ReadDir(filepath.Join(n.dir, "policies"))
	var out []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && sandboxIDRE.MatchString(id) {
			out = append(out, id)
		}
	}
	return out
}

func (n *Manager) Prepare(ctx context.Context, id string, p *api.NetworkPolicy) (controller.NetSetup, error) {
	pol, err := n.recordedPolicy(id, p)
	if err != nil {
		return controller.NetSetup{}, err
	}
	direct := n.srv.DirectRoutes(toEgress(pol))
	link, err := n.mgr.Setup(ctx, id, direct)
	if err != nil {
		return controller.NetSetup{}, err
	}
	n.warnForwarding(id, direct)
	gw := link.Gateway.String()
	if err := os.WriteFile(n.resolvPath(id), []byte("nameserver "+gw+"\noptions attempts:2 timeout:2\n"), 0o644); err != nil {
		return controller.NetSetup{}, err
	}
	if err := n.srv.Attach(id, link.Gateway, link.Addr, toEgress(pol)); err != nil {
		return controller.NetSetup{}, err
	}
	proxy := fmt.Sprintf("http://%s:%d", gw, egress.ProxyPort)
	noProxy := "localhost,127.0.0.1,::1"
	return controller.NetSetup{
		NetNSPath:   link.NetNS,
		ResolvConf:  n.resolvPath(id),
		Env:         append(append(proxyEnv(proxy), "NO_PROXY="+noProxy, "no_proxy="+noProxy), trustEnv()...), // inject.go
		CACert:      n.ca.CertPEM(),
		TrustBundle: n.trustPath(id),
	}, nil
}

// proxyEnv are the variables that point the usual clients at proxy.
func proxyEnv(proxy string) []string {
	return []string{"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy}
}

func (n *Manager) SetPolicy(ctx context.Context, id string, p api.NetworkPolicy) error {
	if _, ok := n.Policy(id); !ok {
		return fmt.Errorf("sandbox %s has no network: %w", id, errdefs.ErrConflict)
	}
	// The firewall's address rules and the proxy's rules change together,
	// the firewall first: if it fails, nothing has changed. A sandbox
	// without plumbing yet gets its address rules at its start.
	if _, ok := n.mgr.Get(id); ok {
		direct := n.srv.DirectRoutes(toEgress(p))
		if err := n.mgr.SetDirect(ctx, id, direct); err != nil {
			return err
		}
		n.warnForwarding(id, direct)
	}
	if err := n.writePolicy(id, p); err != nil {
		return err
	}
	n.srv.SetPolicy(id, toEgress(p)) // not attached (stopped): applies at next start
	return nil
}

// warnForwarding says when address rules cannot work yet: the sandbox's
// packets are forwarded from its veth, but the replies come in by the
// host's uplink, which forwards only if the operator turned IPv4
// forwarding on (Paddock never turns it on for the whole host).
func (n *Manager) warnForwarding(id string, direct []netip.Prefix) {
	if len(direct) == 0 {
		return
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil && strings.TrimSpace(string(b)) == "0" {
		n.log.Warn("address rules need IPv4 forwarding on the interface replies come in by (net.ipv4.ip_forward=1, or net.ipv4.conf.<uplink>.forwarding=1); it is off for the host", "sandbox", id)
	}
}

func (n *Manager) Release(ctx context.Context, id string) error {
	if !sandboxIDRE.MatchString(id) {
		return nil
	}
	n.srv.Detach(id)
	err := n.mgr.Teardown(ctx, id)
	_ = os.Remove(n.resolvPath(id))
	_ = os.Remove(n.trustPath(id))
	if rerr := os.Remove(n.policyPath(id)); rerr != nil && !os.IsNotExist(rerr) {
		err = errors.Join(err, rerr)
	}
	return err
}

func (n *base) Grant(ctx context.Context, id string, hosts []string) (func(), error) {
	revoke, ok := n.srv.Grant(id, hosts)
	if !ok {
		return nil, fmt.Errorf("sandbox %s: its network is not running: %w", id, errdefs.ErrUnavailable)
	}
	return revoke, nil
}

func (n *Manager) List() []string {
	seen := map[string]bool{}
	for _, id := range n.mgr.List() {
		seen[id] = true
	}
	for _, id := range n.policyIDs() {
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	return out
}
