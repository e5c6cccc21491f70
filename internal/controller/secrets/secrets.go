// Package secrets is the controller's secrets subsystem: the values that
// credential injection puts into a sandbox's outgoing requests
// (docs/networking.md), kept per owner (names are per owner), set,
// described and deleted here and never read back. A secret's value goes
// only to the egress proxy, for the owner of the sandbox whose rule names
// it. The store is controller.Secrets (internal/secretstore); which
// sandboxes' rules use a secret, and the lock that keeps a rule from
// starting to name one being deleted, come from the controller's core
// (Core).
package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// SecretUsers maps each owner's secrets to the sandboxes whose
	// injection rules name them, as ctx's caller may see them.
	SecretUsers(ctx context.Context) (map[controller.SecretRef][]string, error)
	// HoldSecrets runs fn while no injection rule can start naming a
	// secret.
	HoldSecrets(fn func() error) error
}

var _ Core = (*controller.Controller)(nil)

// Service serves secrets.
type Service struct {
	core Core
	st   controller.Secrets
	log  *slog.Logger
}

// New returns the subsystem over st (nil: this daemon keeps no secrets,
// and every call says so).
func New(core Core, st controller.Secrets, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: core, st: st, log: log}
}

func (svc *Service) secrets() (controller.Secrets, error) {
	if svc.st == nil {
		return nil, fmt.Errorf("this daemon keeps no secrets (it has no egress networking): %w", errdefs.ErrUnavailable)
	}
	return svc.st, nil
}

// secretOwner is the owner whose secrets a request by ctx's caller names:
// its own, or, for a caller that sees everything, the owner it asks for.
// A key of scope own that asks for another owner's is told that secret
// does not exist, as for one that does not.
func secretOwner(ctx context.Context, asked, name string) (string, error) {
	if err := controller.RequireCaller(ctx); err != nil {
		return "", err
	}
	me := controller.Caller(ctx)
	if asked == "" || asked == me {
		return me, nil
	}
	if !controller.IsID(asked) {
		return "", errdefs.Invalid("owner %q is not an API key id or %q", rules.Truncate(asked, 64), api.CallerLocal)
	}
	if controller.CallerScope(ctx) != api.KeyScopeAll {
		return "", errSecretNotFound(name)
	}
	return asked, nil
}

// Set stores a secret of owner (ctx's caller when empty; another
// owner only for a caller that sees everything); the value is validated
// here and never echoed. Another owner's secret of the same name is
// neither read nor changed.
func (svc *Service) Set(ctx context.Context, owner, name string, value []byte) (*api.Secret, bool, error) {
	st, err := svc.secrets()
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
	svc.log.Info("secret stored", "secret", name, "owner", owner, "created", created, "caller", controller.Caller(ctx))
	users, err := svc.core.SecretUsers(ctx)
	if err != nil {
		return nil, false, err
	}
	s.UsedBy = users[controller.SecretRef{Owner: owner, Name: name}]
	return &s, created, nil
}

// Get returns owner's secret (ctx's caller's when empty), with the
// sandboxes whose rules use it; never its value.
func (svc *Service) Get(ctx context.Context, owner, name string) (*api.Secret, error) {
	st, err := svc.secrets()
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
	users, err := svc.core.SecretUsers(ctx)
	if err != nil {
		return nil, err
	}
	s.UsedBy = users[controller.SecretRef{Owner: owner, Name: name}]
	return &s, nil
}

// List lists the secrets ctx's caller may see, with the sandboxes
// whose rules use each (always the secret's owner's).
func (svc *Service) List(ctx context.Context) ([]api.Secret, error) {
	st, err := svc.secrets()
	if err != nil {
		return nil, err
	}
	list, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	users, err := svc.core.SecretUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, s := range list {
		if controller.Visible(ctx, s.CreatedBy) {
			s.UsedBy = users[controller.SecretRef{Owner: s.CreatedBy, Name: s.Name}]
			out = append(out, s)
		}
	}
	return out, nil
}

// Delete removes owner's secret (ctx's caller's when empty) that no
// injection rule references. Only the owner's sandboxes can reference it.
func (svc *Service) Delete(ctx context.Context, owner, name string) error {
	st, err := svc.secrets()
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
	return svc.core.HoldSecrets(func() error {
		if _, err := st.Get(ctx, owner, name); errors.Is(err, errdefs.ErrNotFound) {
			return errSecretNotFound(name)
		} else if err != nil {
			return err
		}
		users, err := svc.core.SecretUsers(ctx)
		if err != nil {
			return err
		}
		if ids := users[controller.SecretRef{Owner: owner, Name: name}]; len(ids) > 0 {
			return fmt.Errorf("secret %q is used by injection rules of sandbox(es) %s; remove them first (paddock net uninject): %w",
				name, strings.Join(ids, ", "), errdefs.ErrConflict)
		}
		if err := st.Delete(ctx, owner, name); err != nil {
			if errors.Is(err, errdefs.ErrNotFound) {
				return errSecretNotFound(name)
			}
			return err
		}
		svc.log.Info("secret deleted", "secret", name, "owner", owner, "caller", controller.Caller(ctx))
		return nil
	})
}

// errSecretNotFound is the answer for a secret that is not stored and for
// one another owner holds alike.
func errSecretNotFound(name string) error {
	return errdefs.NotFound("secret %q does not exist", name)
}
