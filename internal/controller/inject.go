package controller

import (
	"context"
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// egressPolicy returns the sandbox's recorded egress policy, or a conflict
// for a sandbox without a network. The caller holds the entry's lock.
func (c *Controller) egressPolicy(id string) (api.NetworkPolicy, error) {
	cur := c.networkOf(id)
	if cur == nil || cur.Mode != api.NetworkEgress {
		return api.NetworkPolicy{}, fmt.Errorf("sandbox %s has no network (mode none); create it with mode egress to inject credentials: %w", id, errdefs.ErrConflict)
	}
	return *cur, nil
}

// SetInjection adds a credential injection rule to an egress sandbox, or
// replaces the rule for the same host and header. It applies to the next
// request.
func (c *Controller) SetInjection(ctx context.Context, ref string, in api.Injection) (*api.NetworkPolicy, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, err := c.egressPolicy(rec.ID)
	if err != nil {
		return nil, err
	}
	n, err := egress.NormalizeInjection(egress.Injection{Host: in.Host, Header: in.Header, Value: in.Value})
	if err != nil {
		return nil, err
	}
	in = api.Injection{Host: n.Host, Header: n.Header, Value: n.Value}
	next := cur
	next.Inject = nil
	replaced := false
	for _, r := range cur.Inject {
		if r.Host == in.Host && r.Header == in.Header {
			r, replaced = in, true
		}
		next.Inject = append(next.Inject, r)
	}
	if !replaced {
		next.Inject = append(next.Inject, in)
	}
	// Held so the secret the rule names cannot be deleted meanwhile.
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	// Only the new rule: the others were checked when they were set.
	if err := c.checkInjectionSecrets(ctx, rec.KeyID, []api.Injection{in}); err != nil { // secrets.go
		return nil, err
	}
	p, err := c.opts.Network.Validate(next)
	if err != nil {
		return nil, err
	}
	if err := c.opts.Network.SetPolicy(ctx, rec.ID, p); err != nil {
		return nil, err
	}
	c.log.Info("credential injection set", "sandbox", rec.ID, "host", in.Host, "header", in.Header)
	_ = c.Record(ctx, rec.ID, api.LedgerEntry{
		Kind: api.LedgerNetworkInject,
		Note: fmt.Sprintf("inject %s for %s", in.Header, in.Host),
		Data: map[string]string{"host": in.Host, "header": in.Header, "action": "set"},
	})
	return &p, nil
}

// RemoveInjection removes the rules for host (all headers, or one).
func (c *Controller) RemoveInjection(ctx context.Context, ref, host, header string) (*api.NetworkPolicy, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	h, err := egress.NormalizeGlob(host)
	if err != nil {
		return nil, err
	}
	if header != "" {
		if header, err = egress.NormalizeHeaderName(header); err != nil {
			return nil, err
		}
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, err := c.egressPolicy(rec.ID)
	if err != nil {
		return nil, err
	}
	next := cur
	next.Inject = nil
	var removed []string
	for _, r := range cur.Inject {
		if r.Host == h && (header == "" || r.Header == header) {
			removed = append(removed, r.Header)
			continue
		}
		next.Inject = append(next.Inject, r)
	}
	if len(removed) == 0 {
		if header != "" {
			return nil, errdefs.NotFound("sandbox %s has no injection of %s for %s", rec.ID, header, h)
		}
		return nil, errdefs.NotFound("sandbox %s has no injection for %s", rec.ID, h)
	}
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	if err := c.opts.Network.SetPolicy(ctx, rec.ID, next); err != nil {
		return nil, err
	}
	for _, name := range removed {
		c.log.Info("credential injection removed", "sandbox", rec.ID, "host", h, "header", name)
		_ = c.Record(ctx, rec.ID, api.LedgerEntry{
			Kind: api.LedgerNetworkInject,
			Note: fmt.Sprintf("removed injection of %s for %s", name, h),
			Data: map[string]string{"host": h, "header": name, "action": "remove"},
		})
	}
	return &next, nil
}
