package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/paddock-dev/paddock/api"
)

// ReplaceNetworkPolicy replaces everything an egress sandbox's network
// says in one step: allow and deny rules, ports and injection rules. The
// proxy sees the old policy or the new one, never a mix, so a request in
// between never meets the new hosts with the old credentials or the other
// way round. The mode stays egress (it is fixed at creation). Rule changes
// are recorded as network_rules, each injection added, changed or removed
// as network_inject.
func (c *Controller) ReplaceNetworkPolicy(ctx context.Context, ref string, p api.NetworkPolicy) (*api.NetworkPolicy, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, err := c.egressPolicy(rec.ID) // inject.go
	if err != nil {
		return nil, err
	}
	p.Mode = api.NetworkEgress
	// Held so no secret a rule names can be deleted between the check and
	// the change.
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	// Rules kept as they were were checked when they were set; new and
	// changed ones may name only the sandbox's owner's secrets (secrets.go).
	var added []api.Injection
	for _, in := range p.Inject {
		if !slices.Contains(cur.Inject, in) {
			added = append(added, in)
		}
	}
	if err := c.checkInjectionSecrets(ctx, rec.KeyID, added); err != nil {
		return nil, err
	}
	next, err := c.opts.Network.Validate(p)
	if err != nil {
		return nil, err
	}
	if err := c.opts.Network.SetPolicy(ctx, rec.ID, next); err != nil {
		return nil, err
	}
	c.log.Info("network policy replaced", "sandbox", rec.ID, "allow", next.AllowHosts, "deny", next.DenyHosts, "injections", len(next.Inject))
	if !slices.Equal(cur.AllowHosts, next.AllowHosts) || !slices.Equal(cur.DenyHosts, next.DenyHosts) || !slices.Equal(cur.Ports, next.Ports) ||
		!slices.Equal(cur.AllowCIDRs, next.AllowCIDRs) || !slices.Equal(cur.DenyCIDRs, next.DenyCIDRs) {
		_ = c.Record(ctx, rec.ID, rulesEntry(next))
	}
	for _, ch := range injectionChanges(cur.Inject, next.Inject) {
		_ = c.Record(ctx, rec.ID, api.LedgerEntry{
			Kind: api.LedgerNetworkInject,
			Note: ch.note,
			Data: map[string]string{"host": ch.in.Host, "header": ch.in.Header, "action": ch.action},
		})
	}
	return &next, nil
}

type injectionChange struct {
	in     api.Injection
	action string // set or remove
	note   string
}

// injectionChanges lists what turns the rules from into the rules to,
// per host and header; a rule whose template changed is a set.
func injectionChanges(from, to []api.Injection) []injectionChange {
	type key struct{ host, header string }
	old := map[key]string{}
	for _, in := range from {
		old[key{in.Host, in.Header}] = in.Value
	}
	var out []injectionChange
	seen := map[key]bool{}
	for _, in := range to {
		k := key{in.Host, in.Header}
		seen[k] = true
		if v, ok := old[k]; ok && v == in.Value {
			continue
		}
		out = append(out, injectionChange{in: in, action: "set", note: fmt.Sprintf("inject %s for %s", in.Header, in.Host)})
	}
	for _, in := range from {
		if !seen[key{in.Host, in.Header}] {
			out = append(out, injectionChange{in: in, action: "remove", note: fmt.Sprintf("removed injection of %s for %s", in.Header, in.Host)})
		}
	}
	return out
}
