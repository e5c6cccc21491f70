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
	// Set creates or replaces a secret; it reports whether it was created.
	Set(ctx context.Context, name string, value []byte) (api.Secret, bool, error)
	// List returns every secret's name and times.
	List(ctx context.Context) ([]api.Secret, error)
	// Delete removes a secret (ErrNotFound if there is none).
	Delete(ctx context.Context, name string) error
	// Exists reports whether a secret is stored.
	Exists(ctx context.Context, name string) (bool, error)
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
	if err := egress.ValidSecretName(name); err != nil {
		return nil, false, err
	}
	if err := egress.ValidSecretValue(value); err != nil {
		return nil, false, err
	}
	s, created, err := st.Set(ctx, name, value)
	if err != nil {
		return nil, false, err
	}
	c.log.Info("secret stored", "secret", name, "created", created)
	s.UsedBy = c.secretUsers()[name]
	return &s, created, nil
}

// ListSecrets lists secrets with the sandboxes whose rules use each.
func (c *Controller) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	st, err := c.secrets()
	if err != nil {
		return nil, err
	}
	list, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	users := c.secretUsers()
	for i := range list {
		list[i].UsedBy = users[list[i].Name]
	}
	return list, nil
}

// DeleteSecret removes a secret no injection rule references.
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
	if users := c.secretUsers()[name]; len(users) > 0 {
		return fmt.Errorf("secret %q is used by injection rules of sandbox(es) %s; remove them first (paddock net uninject): %w",
			name, strings.Join(users, ", "), errdefs.ErrConflict)
	}
	if err := st.Delete(ctx, name); err != nil {
		return err
	}
	c.log.Info("secret deleted", "secret", name)
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
