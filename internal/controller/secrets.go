package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Secrets keeps the daemon's secrets for credential injection. Values go
// in and never come back out through this interface: only the egress
// proxy reads them, on the way to an upstream.
type Secrets interface {
	// Set creates a secret owned by owner, or replaces the value of one
	// owner holds; it reports whether it was created. With anyOwner it
	// replaces any owner's (the owner stays); without, a name another
	// owner holds is ErrConflict and nothing changes.
	Set(ctx context.Context, name, owner string, anyOwner bool, value []byte) (api.Secret, bool, error)
	// List returns every secret's name, owner (CreatedBy) and times.
	List(ctx context.Context) ([]api.Secret, error)
	// Delete removes a secret (ErrNotFound if there is none).
	Delete(ctx context.Context, name string) error
	// Owner returns a stored secret's owner; ok is false when none of
	// that name is stored.
	Owner(ctx context.Context, name string) (owner string, ok bool, err error)
}

func (c *Controller) secrets() (Secrets, error) {
	if c.opts.Secrets == nil {
		return nil, fmt.Errorf("this daemon keeps no secrets (it has no egress networking): %w", errdefs.ErrUnavailable)
	}
	return c.opts.Secrets, nil
}

// SetSecret stores a secret; the value is validated here and never echoed.
func (c *Controller) SetSecret(ctx context.Context, name string, value []byte) (*api.Secret, bool, error) {
	st, err := c.secrets()
	if err != nil {
		return nil, false, err
	}
	if err := requireCaller(ctx); err != nil {
		return nil, false, err
	}
	if err := egress.ValidSecretName(name); err != nil {
		return nil, false, err
	}
	if err := egress.ValidSecretValue(value); err != nil {
		return nil, false, err
	}
	// A key of scope own never replaces another owner's secret: the name
	// is taken (the store checks and writes in one step). Callers that see
	// everything replace any, keeping its owner.
	s, created, err := st.Set(ctx, name, Caller(ctx), CallerScope(ctx) == api.KeyScopeAll, value)
	if err != nil {
		return nil, false, err
	}
	c.log.Info("secret stored", "secret", name, "created", created, "caller", Caller(ctx))
	users, _, err := c.visibleSecretUsers(ctx)
	if err != nil {
		return nil, false, err
	}
	s.UsedBy = users[name]
	return &s, created, nil
}

// ListSecrets lists the secrets ctx's caller may see, with the sandboxes
// (that it may see) whose rules use each.
func (c *Controller) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	st, err := c.secrets()
	if err != nil {
		return nil, err
	}
	list, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	users, _, err := c.visibleSecretUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, s := range list {
		if visible(ctx, s.CreatedBy) {
			s.UsedBy = users[s.Name]
			out = append(out, s)
		}
	}
	return out, nil
}

// DeleteSecret removes a secret ctx's caller may see that no injection
// rule references.
func (c *Controller) DeleteSecret(ctx context.Context, name string) error {
	st, err := c.secrets()
	if err != nil {
		return err
	}
	if err := egress.ValidSecretName(name); err != nil {
		return err
	}
	// Held so a rule cannot start referencing the secret between the
	// check and the delete.
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	owner, ok, err := st.Owner(ctx, name)
	if err != nil {
		return err
	}
	if !ok || !visible(ctx, owner) {
		return errSecretNotFound(name)
	}
	users, hidden, err := c.visibleSecretUsers(ctx)
	if err != nil {
		return err
	}
	if seen, others := users[name], hidden[name]; len(seen) > 0 || others > 0 {
		who := strings.Join(seen, ", ")
		switch {
		case len(seen) == 0:
			who = fmt.Sprintf("%d sandbox(es) of other callers", others)
		case others > 0:
			who += fmt.Sprintf(" and %d sandbox(es) of other callers", others)
		}
		return fmt.Errorf("secret %q is used by injection rules of sandbox(es) %s; remove them first (paddock net uninject): %w",
			name, who, errdefs.ErrConflict)
	}
	if err := st.Delete(ctx, name); err != nil {
		return err
	}
	c.log.Info("secret deleted", "secret", name, "caller", Caller(ctx))
	return nil
}

// errSecretNotFound is the answer for a secret that is not stored and for
// one another owner holds alike.
func errSecretNotFound(name string) error {
	return errdefs.NotFound("secret %q does not exist", name)
}

// visibleSecretUsers is secretUsers with the sandboxes ctx's caller may
// not see left out, counted per secret in hidden.
func (c *Controller) visibleSecretUsers(ctx context.Context) (users map[string][]string, hidden map[string]int, err error) {
	users, hidden = c.secretUsers(), map[string]int{}
	seen, err := c.visibleSandboxes(ctx)
	if err != nil || seen == nil {
		return users, hidden, err
	}
	for name, ids := range users {
		kept := ids[:0]
		for _, id := range ids {
			if seen[id] {
				kept = append(kept, id)
			} else {
				hidden[name]++
			}
		}
		if len(kept) == 0 {
			delete(users, name)
		} else {
			users[name] = kept
		}
	}
	return users, hidden, nil
}

// checkInjectionSecrets refuses, for a key of scope own, injection rules
// naming a secret it does not own, in the words the network uses for a
// secret that does not exist: another owner's secret does not exist for
// it. Rules are normalised as the network will (a later rule for the same
// host and header replaces an earlier one); a rule that does not
// normalise is left for the network's validation to refuse.
func (c *Controller) checkInjectionSecrets(ctx context.Context, rules []api.Injection) error {
	if CallerScope(ctx) == api.KeyScopeAll || len(rules) == 0 {
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
		return err
	}
	for _, r := range norm {
		t, err := egress.ParseTemplate(r.Value)
		if err != nil {
			return nil
		}
		for _, name := range t.Secrets() {
			owner, ok, err := st.Owner(ctx, name)
			if err != nil {
				return err
			}
			if !ok || !visible(ctx, owner) {
				return errdefs.Invalid("injection of %s for %s: secret %q does not exist (paddock secret set %s)", r.Header, r.Host, name, name)
			}
		}
	}
	return nil
}

// secretUsers maps secret names to the sandboxes whose rules reference them.
func (c *Controller) secretUsers() map[string][]string {
	out := map[string][]string{}
	if c.opts.Network == nil {
		return out
	}
	ids := c.opts.Network.List()
	sort.Strings(ids)
	for _, id := range ids {
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
				if !slices.Contains(out[name], id) {
					out[name] = append(out[name], id)
				}
			}
		}
	}
	return out
}
