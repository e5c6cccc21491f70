package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// A request's caller is who it comes from (an API key id, or
// api.CallerLocal for the unix socket) and what that caller may see (the
// key's scope). Sandboxes, snapshots, backups, secrets and ledgers record
// the caller that made them as their owner; a caller of scope own sees
// only what it owns, and everything else is not found (never denied, which
// would tell it that the thing exists).

type callerKey struct{}

type caller struct {
	id    string
	scope string
}

// WithCaller marks ctx as coming from the API key keyID of the given scope
// (api.KeyScopeOwn or api.KeyScopeAll; anything else counts as own).
// Creates record the key as owner and count against its quota.
func WithCaller(ctx context.Context, keyID, scope string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{id: keyID, scope: scope})
}

// System marks ctx as the daemon's own work (reconcile, idle stops, the
// end of lifetimes, teardown, the data planes that authenticate by a
// sandbox's own token): it acts as api.CallerLocal, which sees everything.
// Every context that reaches the controller carries a caller: a request's
// is set by its listener's middleware (an API key's, or the unix socket's
// local caller), the daemon's own by System. A context that carries none
// (a route outside the middleware, a goroutine started from
// context.Background()) sees nothing and may create nothing: tenancy
// fails closed.
func System(ctx context.Context) context.Context {
	return WithCaller(ctx, api.CallerLocal, api.KeyScopeAll)
}

// Caller is the id of the API key ctx comes from, api.CallerLocal for the
// unix socket and the daemon's own work, or "" when ctx carries no caller.
func Caller(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c.id
	}
	return ""
}

// CallerScope is the scope of the caller ctx comes from: api.KeyScopeAll
// for the local caller and keys of scope all, api.KeyScopeOwn for every
// other key, and "" (which sees nothing) when ctx carries no caller.
func CallerScope(ctx context.Context) string {
	c, ok := ctx.Value(callerKey{}).(caller)
	switch {
	case !ok || c.id == "":
		return ""
	case c.id == api.CallerLocal || c.scope == api.KeyScopeAll:
		return api.KeyScopeAll
	}
	return api.KeyScopeOwn
}

// maySee is the one rule of visibility: whether a caller of the given
// scope sees what owner made. The local caller and keys of scope all see
// everything; a key of scope own sees what it owns, and never what belongs
// to no one (records older than owners, owner "").
func maySee(callerID, scope, owner string) bool {
	if callerID == "" {
		return false
	}
	if callerID == api.CallerLocal || scope == api.KeyScopeAll {
		return true
	}
	return owner != "" && owner == callerID
}

// errNoCaller refuses what a context without a caller asks: it is a
// route or a goroutine that was not given one (System, WithCaller).
var errNoCaller = fmt.Errorf("the request carries no caller (neither an API key nor the daemon's unix socket): %w", errdefs.ErrUnauthenticated)

// requireCaller refuses ctx when it carries no caller.
func requireCaller(ctx context.Context) error {
	if Caller(ctx) == "" {
		return errNoCaller
	}
	return nil
}

// visible applies maySee to ctx's caller.
func visible(ctx context.Context, owner string) bool {
	return maySee(Caller(ctx), CallerScope(ctx), owner)
}

// requireScopeAll refuses an operation on what all callers share (images,
// templates, pools) to a key of scope own: one tenant must not remove what
// the others use.
func requireScopeAll(ctx context.Context, what string) error {
	if CallerScope(ctx) == api.KeyScopeAll {
		return nil
	}
	return fmt.Errorf("%s needs an API key of scope all or the daemon's unix socket; API key %s has scope own: %w",
		what, Caller(ctx), errdefs.ErrPermissionDenied)
}

// KeyScope returns the scope of the API key id, for front ends that know a
// key only by its id. A key that cannot be read counts as own, the
// narrower scope.
func (c *Controller) KeyScope(ctx context.Context, id string) string {
	k, err := c.opts.Store.GetKey(ctx, id)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			c.log.Warn("read key scope", "key", id, "err", err)
		}
		return api.KeyScopeOwn
	}
	if k.Scope == api.KeyScopeAll {
		return api.KeyScopeAll
	}
	return api.KeyScopeOwn
}

// Names are per owner: two owners may each hold a sandbox (or snapshot)
// named dev, and creating one under a name only another owner holds
// succeeds, so a name never tells one owner that another has something.
// A name ctx's caller already holds is refused with these.

func errSandboxNameTaken(name string) error {
	return fmt.Errorf("you already have a sandbox named %q: %w", name, errdefs.ErrConflict)
}

func errSnapshotNameTaken(name string) error {
	return fmt.Errorf("you already have a snapshot named %q: %w", name, errdefs.ErrConflict)
}

// pickNamed is what name means to ctx's caller among the things of kind
// what that hold it (at most one per owner): the caller's own first; for
// a caller that sees everything, else the one other owner's; when several
// other owners hold it, a conflict asking for an id, since guessing would
// act on the wrong one. A caller of scope own sees only its own, so for it
// a name is never ambiguous and another owner's is not found.
func pickNamed[T any](ctx context.Context, what, name string, held []T, owner func(T) string) (T, error) {
	var zero T
	me := Caller(ctx)
	var seen []T
	for _, x := range held {
		if me != "" && owner(x) == me {
			return x, nil
		}
		if visible(ctx, owner(x)) {
			seen = append(seen, x)
		}
	}
	switch len(seen) {
	case 0:
		return zero, errdefs.NotFound("%s %q", what, name)
	case 1:
		return seen[0], nil
	}
	return zero, fmt.Errorf("%d owners each have a %s named %q; name it by its id: %w", len(seen), what, name, errdefs.ErrConflict)
}
