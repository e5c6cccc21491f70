package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Secrets keeps the daemon's secrets for credential injection, each
// addressed by its owner and name: names are per owner, so two owners may
// each keep a secret named token, and nothing here finds a secret by name
// alone. Values go in and never come back out through this interface:
// only the egress proxy reads them, on the way to an upstream, for the
// owner of the sandbox whose rule names them.
type Secrets interface {
	// Set creates owner's secret, or replaces the value of the one of
	// that name owner keeps; it reports whether it was created.
	Set(ctx context.Context, owner, name string, value []byte) (api.Secret, bool, error)
	// Get returns owner's secret of that name, never its value
	// (ErrNotFound when owner keeps none).
	Get(ctx context.Context, owner, name string) (api.Secret, error)
	// List returns every owner's secrets: name, owner (CreatedBy), times.
	List(ctx context.Context) ([]api.Secret, error)
	// Delete removes owner's secret (ErrNotFound if owner keeps none).
	Delete(ctx context.Context, owner, name string) error
}

// HoldSecrets runs fn while no injection rule can start naming a secret
// (a secret's deletion checks that none does, then deletes it).
func (c *Controller) HoldSecrets(fn func() error) error {
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	return fn()
}

func (c *Controller) secrets() (Secrets, error) {
	if c.opts.Secrets == nil {
		return nil, fmt.Errorf("this daemon keeps no secrets (it has no egress networking): %w", errdefs.ErrUnavailable)
	}
	return c.opts.Secrets, nil
}

// checkInjectionSecrets refuses injection rules for a sandbox of owner
// that name a secret owner does not keep, whoever asks: a rule's secret
// is always its sandbox's owner's (another owner's of the same name is
// never used, and does not exist for it). Rules are normalised as the
// network will (a later rule for the same host and header replaces an
// earlier one); a rule that does not normalise is left for the network's
// validation to refuse.
func (c *Controller) checkInjectionSecrets(ctx context.Context, owner string, rules []api.Injection) error {
	if len(rules) == 0 {
		return nil
	}
	var norm []egress.Injection
	for _, r := range rules {
		n, err := egress.NormalizeInjection(egress.Injection{Host: r.Host, Header: r.Header, Value: r.Value})
		if err != nil {
			return nil
		}
		replaced := false
		for i := range norm {
			if norm[i].Host == n.Host && norm[i].Header == n.Header {
				norm[i], replaced = n, true
			}
		}
		if !replaced {
			norm = append(norm, n)
		}
	}
	st, err := c.secrets()
	if err != nil {
		return fmt.Errorf("credential injection: %w", err)
	}
	for _, r := range norm {
		t, err := egress.ParseTemplate(r.Value)
		if err != nil {
			return nil
		}
		for _, name := range t.Secrets() {
			_, err := st.Get(ctx, owner, name)
			if errors.Is(err, errdefs.ErrNotFound) {
				return errdefs.Invalid("injection of %s for %s: secret %q does not exist for the sandbox's owner (paddock secret set %s)", r.Header, r.Host, name, name)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// SecretRef is one owner's secret.
type SecretRef struct{ Owner, Name string }

// SecretUsers maps each owner's secrets to the sandboxes whose injection
// rules reference them (internal/controller/secrets shows them): a
// sandbox's rules name its owner's secrets only. ctx's caller sees only
// the secrets (and so the sandboxes) it may see.
func (c *Controller) SecretUsers(ctx context.Context) (map[SecretRef][]string, error) {
	out := map[SecretRef][]string{}
	if c.opts.Network == nil {
		return out, nil
	}
	recs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		return nil, err
	}
	owners := make(map[string]string, len(recs))
	for _, r := range recs {
		owners[r.ID] = r.KeyID
	}
	ids := c.opts.Network.List()
	sort.Strings(ids)
	for _, id := range ids {
		owner, ok := owners[id]
		if !ok || !visible(ctx, owner) {
			continue
		}
		p, ok := c.opts.Network.Policy(id)
		if !ok {
			continue
		}
		for _, in := range p.Inject {
			t, err := egress.ParseTemplate(in.Value)
			if err != nil {
				continue
			}
			for _, name := range t.Secrets() {
				k := SecretRef{owner, name}
				if !slices.Contains(out[k], id) {
					out[k] = append(out[k], id)
				}
			}
		}
	}
	return out, nil
}
