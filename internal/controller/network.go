package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// Network gives egress sandboxes their plumbing and rules. It keeps each
// sandbox's policy itself, so rules survive daemon restarts.
type Network interface {
	// Validate normalises a policy or says what is wrong with it.
	Validate(p api.NetworkPolicy) (api.NetworkPolicy, error)
	// Prepare records the policy (when non-nil) and sets up (again) the
	// sandbox's namespace, firewall rules, proxy and DNS. Idempotent.
	Prepare(ctx context.Context, id string, p *api.NetworkPolicy) (NetSetup, error)
	// SetPolicy replaces the rules; they apply to the next connection,
	// and open connections they refuse are closed.
	SetPolicy(ctx context.Context, id string, p api.NetworkPolicy) error
	// Policy is the sandbox's recorded policy, if it has one.
	Policy(id string) (api.NetworkPolicy, bool)
	// Release removes everything of the sandbox's network. Idempotent.
	Release(ctx context.Context, id string) error
	// List returns every sandbox id with any network state.
	List() []string
	// Grant allows hosts until the returned revoke is called; revoking
	// closes open connections that only the grant allowed.
	Grant(ctx context.Context, id string, hosts []string) (revoke func(), err error)
}

// FirewallNamer is a Network that can say which firewall backend it uses,
// for Info.
type FirewallNamer interface {
	Firewall() string
}

// NetSetup is what the runtime needs to join a prepared network.
type NetSetup struct {
	NetNSPath  string
	ResolvConf string
	Env        []string
	// CACert is the egress CA certificate (PEM) the sandbox must trust, and
	// TrustBundle the host file the controller composes its trust bundle
	// in: the image's CA certificates plus CACert (trust.go).
	CACert      []byte
	TrustBundle string
	// SecretEnv are variables that carry a credential (runtime.Spec), and
	// Egress what a sandbox on a cluster may reach (runtime.Egress).
	SecretEnv []string
	Egress    *runtime.Egress
}

// admitNetwork validates a create request's network; its injection rules
// may name only secrets of the caller, the sandbox's owner to be.
func (c *Controller) admitNetwork(ctx context.Context, req *api.CreateSandboxRequest, rtName string) (*api.NetworkPolicy, error) {
	if req.Network == nil || req.Network.Mode == "" || req.Network.Mode == api.NetworkNone {
		if req.Network != nil && (len(req.Network.AllowHosts) > 0 || len(req.Network.DenyHosts) > 0 || len(req.Network.AllowCIDRs) > 0 || len(req.Network.DenyCIDRs) > 0) {
			return nil, errdefs.Invalid("network: host and address rules need mode %q", api.NetworkEgress)
		}
		return nil, nil
	}
	if req.Network.Mode != api.NetworkEgress {
		return nil, errdefs.Invalid("network mode %q: want %s or %s", req.Network.Mode, api.NetworkNone, api.NetworkEgress)
	}
	if c.opts.Network == nil && c.cfg.Backend == config.BackendKubernetes {
		return nil, fmt.Errorf("network mode egress: this daemon has no egress proxy for the cluster's pods (serve --kube-egress-proxy IP:PORT): %w", errdefs.ErrFailedPrecondition)
	}
	if c.opts.Network == nil {
		return nil, fmt.Errorf("network mode egress: this daemon has no networking (needs root, iproute2 and iptables): %w", errdefs.ErrUnavailable)
	}
	if err := c.checkInjectionSecrets(ctx, Caller(ctx), req.Network.Inject); err != nil { // secrets.go
		return nil, err
	}
	p, err := c.opts.Network.Validate(*req.Network)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// recheckInjectionSecrets runs once a new sandbox's policy is recorded and
// before anything in it runs: a secret its rules name may have been
// deleted by its owner since admission. From now on the recorded rules
// keep it from being deleted, so the check holds.
func (c *Controller) recheckInjectionSecrets(ctx context.Context, owner string, p *api.NetworkPolicy) error {
	if p == nil || len(p.Inject) == 0 {
		return nil
	}
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	return c.checkInjectionSecrets(ctx, owner, p.Inject)
}

// prepareNetwork sets up an egress sandbox's network before its container
// starts; sandboxes without a policy get none.
func (c *Controller) prepareNetwork(ctx context.Context, id string, p *api.NetworkPolicy) (NetSetup, error) {
	if c.opts.Network == nil {
		return NetSetup{}, nil
	}
	if p == nil {
		if _, ok := c.opts.Network.Policy(id); !ok {
			return NetSetup{}, nil
		}
	}
	ns, err := c.opts.Network.Prepare(ctx, id, p)
	if err != nil {
		return NetSetup{}, fmt.Errorf("sandbox %s network: %w", id, err)
	}
	return ns, nil
}

func (c *Controller) releaseNetwork(ctx context.Context, id string) {
	if c.opts.Network == nil {
		return
	}
	if err := c.opts.Network.Release(ctx, id); err != nil {
		c.log.Warn("release network", "sandbox", id, "err", err)
	}
}

func (c *Controller) networkOf(id string) *api.NetworkPolicy {
	if c.opts.Network == nil {
		return nil
	}
	if p, ok := c.opts.Network.Policy(id); ok {
		return &p
	}
	return nil
}

// reconcileNetwork removes the network of every sandbox that is gone and
// restores rules, proxy and DNS of those that live on (a new daemon
// starts with empty chains).
func (c *Controller) reconcileNetwork(ctx context.Context, recs []*store.Sandbox) {
	if c.opts.Network == nil {
		return
	}
	live := map[string]bool{}
	for _, r := range recs {
		if r.State != api.StateDestroyed {
			live[r.ID] = true
		}
	}
	for _, id := range c.opts.Network.List() {
		if !live[id] {
			c.log.Warn("removing orphan sandbox network", "sandbox", id)
			c.releaseNetwork(ctx, id)
			continue
		}
		if _, err := c.opts.Network.Prepare(ctx, id, nil); err != nil {
			c.log.Error("restore sandbox network", "sandbox", id, "err", err)
		}
	}
}

// NetworkPolicy returns a sandbox's network.
func (c *Controller) NetworkPolicy(ctx context.Context, ref string) (*api.NetworkPolicy, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if p := c.networkOf(rec.ID); p != nil {
		return p, nil
	}
	return &api.NetworkPolicy{Mode: api.NetworkNone}, nil
}

// SetNetworkRules replaces an egress sandbox's host rules, at once.
func (c *Controller) SetNetworkRules(ctx context.Context, ref string, req api.UpdateNetworkRequest) (*api.NetworkPolicy, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := c.networkOf(rec.ID)
	if cur == nil || cur.Mode != api.NetworkEgress {
		return nil, fmt.Errorf("sandbox %s has no network (mode none); create it with mode egress to give it rules: %w", rec.ID, errdefs.ErrConflict)
	}
	// Injection rules are changed on their own (inject.go) and kept here.
	p, err := c.opts.Network.Validate(api.NetworkPolicy{
		Mode: api.NetworkEgress, AllowHosts: req.AllowHosts, DenyHosts: req.DenyHosts,
		AllowCIDRs: req.AllowCIDRs, DenyCIDRs: req.DenyCIDRs, Ports: req.Ports, Inject: cur.Inject,
	})
	if err != nil {
		return nil, err
	}
	if err := c.opts.Network.SetPolicy(ctx, rec.ID, p); err != nil {
		return nil, err
	}
	c.log.Info("network rules changed", "sandbox", rec.ID, "allow", p.AllowHosts, "deny", p.DenyHosts, "allow_cidrs", p.AllowCIDRs, "deny_cidrs", p.DenyCIDRs)
	_ = c.Record(ctx, rec.ID, rulesEntry(p))
	return &p, nil
}

// rulesEntry is the ledger entry of a rule change: host rules, and
// address rules when there are any.
func rulesEntry(p api.NetworkPolicy) api.LedgerEntry {
	note := fmt.Sprintf("allow %v deny %v", p.AllowHosts, p.DenyHosts)
	var data map[string]string
	if len(p.AllowCIDRs)+len(p.DenyCIDRs) > 0 {
		note += fmt.Sprintf(" allow addresses %v deny addresses %v", p.AllowCIDRs, p.DenyCIDRs)
		data = map[string]string{"allow_cidrs": strings.Join(p.AllowCIDRs, ","), "deny_cidrs": strings.Join(p.DenyCIDRs, ",")}
	}
	return api.LedgerEntry{Kind: api.LedgerNetworkRules, Note: note, Data: data}
}

// grantHosts adds host rules to an egress sandbox for the length of one
// command. The proxy cannot tell the sandbox's processes apart, so while
// the command runs the grant is the whole sandbox's; deny rules still win.
func (c *Controller) grantHosts(ctx context.Context, id string, hosts []string) (func(), error) {
	if len(hosts) == 0 {
		return func() {}, nil
	}
	if c.networkOf(id) == nil {
		return nil, fmt.Errorf("allow_hosts: sandbox %s has no network (mode none): %w", id, errdefs.ErrConflict)
	}
	p, err := c.opts.Network.Validate(api.NetworkPolicy{Mode: api.NetworkEgress, AllowHosts: hosts})
	if err != nil {
		return nil, err
	}
	revoke, err := c.opts.Network.Grant(ctx, id, p.AllowHosts)
	if err != nil {
		return nil, err
	}
	_ = c.Record(ctx, id, api.LedgerEntry{Kind: api.LedgerNetworkGrant, Note: fmt.Sprintf("allow %v while a command runs", p.AllowHosts)})
	return revoke, nil
}
