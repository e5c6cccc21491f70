package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

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

func (c *Controller) secrets() (Secrets, error) {
	if c.opts.Secrets == nil {
		return nil, fmt.Errorf("this daemon keeps no secrets (it has no egress networking): %w", errdefs.ErrUnavailable)
	}
	return c.opts.Secrets, nil
}

// secretOwner is the owner whose secrets a request by ctx's caller names:
// its own, or, for a caller that sees everything, the owner it asks for.
// A key of scope own that asks for another owner's is told that secret
// does not exist, as for one that does not.
func secretOwner(ctx context.Context, asked, name string) (string, error) {
	if err := requireCaller(ctx); err != nil {
		return "", err
	}
	me := Caller(ctx)
	if asked == "" || asked == me {
		return me, nil
	}
	if !idRE.MatchString(asked) {
		return "", errdefs.Invalid("owner %q is not an API key id or %q", truncate(asked, 64), api.CallerLocal)
	}
	if CallerScope(ctx) != api.KeyScopeAll {
		return "", errSecretNotFound(name)
	}
	return asked, nil
}

// SetSecret stores a secret of owner (ctx's caller when empty; another
// owner only for a caller that sees everything); the value is validated
// here and never echoed. Another owner's secret of the same name is
// neither read nor changed.
func (c *Controller) SetSecret(ctx context.Context, owner, name string, value []byte) (*api.Secret, bool, error) {
	st, err := c.secrets()
	if err != nil {
		return nil, false, err
	}
	if err := egress.ValidSecretName(name); err != nil {
		return nil, false, err
	}
	if owner, err = secretOwner(ctx, owner, name); err != nil {
		return nil, false, err
	}
	if err := egress.ValidSecretValue(value); err != nil {
		return nil, false, err
	}
	s, created, err := st.Set(ctx, owner, name, value)
	if err != nil {
		return nil, false, err
	}
	c.log.Info("secret stored", "secret", name, "owner", owner, "created", created, "caller", Caller(ctx))
	users, err := c.secretUsers(ctx)
	if err != nil {
		return nil, false, err
	}
	s.UsedBy = users[secretRef{owner, name}]
	return &s, created, nil
}

// GetSecret returns owner's secret (ctx's caller's when empty), with the
// sandboxes whose rules use it; never its value.
func (c *Controller) GetSecret(ctx context.Context, owner, name string) (*api.Secret, error) {
	st, err := c.secrets()
	if err != nil {
		return nil, err
	}
	if err := egress.ValidSecretName(name); err != nil {
		return nil, err
	}
	if owner, err = secretOwner(ctx, owner, name); err != nil {
		return nil, err
	}
	s, err := st.Get(ctx, owner, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, errSecretNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	users, err := c.secretUsers(ctx)
	if err != nil {
		return nil, err
	}
	s.UsedBy = users[secretRef{owner, name}]
	return &s, nil
}

// ListSecrets lists the secrets ctx's caller may see, with the sandboxes
// whose rules use each (always the secret's owner's).
func (c *Controller) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	st, err := c.secrets()
	if err != nil {
		return nil, err
	}
	list, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	users, err := c.secretUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, s := range list {
		if visible(ctx, s.CreatedBy) {
			s.UsedBy = users[secretRef{s.CreatedBy, s.Name}]
			out = append(out, s)
		}
	}
	return out, nil
}

// DeleteSecret removes owner's secret (ctx's caller's when empty) that no
// injection rule references. Only the owner's sandboxes can reference it.
func (c *Controller) DeleteSecret(ctx context.Context, owner, name string) error {
	st, err := c.secrets()
	if err != nil {
		return err
	}
	if err := egress.ValidSecretName(name); err != nil {
		return err
	}
	if owner, err = secretOwner(ctx, owner, name); err != nil {
		return err
	}
	// Held so a rule cannot start referencing the secret between the
	// check and the delete.
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	if _, err := st.Get(ctx, owner, name); errors.Is(err, errdefs.ErrNotFound) {
		return errSecretNotFound(name)
	} else if err != nil {
		return err
	}
	users, err := c.secretUsers(ctx)
	if err != nil {
		return err
	}
	if ids := users[secretRef{owner, name}]; len(ids) > 0 {
		return fmt.Errorf("secret %q is used by injection rules of sandbox(es) %s; remove them first (paddock net uninject): %w",
			name, strings.Join(ids, ", "), errdefs.ErrConflict)
	}
	if err := st.Delete(ctx, owner, name); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return errSecretNotFound(name)
		}
		return err
	}
	c.log.Info("secret deleted", "secret", name, "owner", owner, "caller", Caller(ctx))
	return nil
}

// errSecretNotFound is the answer for a secret that is not stored and for
// one another owner holds alike.
func errSecretNotFound(name string) error {
	return errdefs.NotFound("secret %q does not exist", name)
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

// secretRef is one owner's secret.
type secretRef struct{ owner, name string }

// secretUsers maps each owner's secrets to the sandboxes whose rules
// reference them: a sandbox's rules name its owner's secrets only. ctx's
// caller sees only the secrets (and so the sandboxes) it may see.
func (c *Controller) secretUsers(ctx context.Context) (map[secretRef][]string, error) {
	out := map[secretRef][]string{}
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
				k := secretRef{owner, name}
				if !slices.Contains(out[k], id) {
					out[k] = append(out[k], id)
				}
			}
		}
	}
	return out, nil
}
