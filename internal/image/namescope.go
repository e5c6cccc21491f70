package image

import "context"

type nameScopeKey struct{}

// nameScope is which imports a name may find for one caller.
type nameScope struct {
	caller string
	shared func(owner string) bool
}

// ForCaller returns ctx under which Resolve finds an image by the name it
// was imported or pulled under only among what caller may be handed by
// name: the newest of its own imports of that name first, else the newest
// of those shared says are everyone's (the operator's: the unix socket,
// keys of scope all). Another tenant's import of the same name is not
// found by it: a name is whatever the importer says it is, and one tenant
// must not choose what another's sandboxes run. A digest finds its image
// whoever imported it, since a digest names the content. Without
// ForCaller (the daemon's own work) a name finds the newest import of all.
func ForCaller(ctx context.Context, caller string, shared func(owner string) bool) context.Context {
	return context.WithValue(ctx, nameScopeKey{}, &nameScope{caller: caller, shared: shared})
}

// rank orders an import of owner for ctx's caller: 0 its own, 1 shared,
// -1 not to be found by name. Without a scope every import ranks 0.
func rank(ctx context.Context, owner string) int {
	sc, ok := ctx.Value(nameScopeKey{}).(*nameScope)
	switch {
	case !ok:
		return 0
	case owner != "" && owner == sc.caller:
		return 0
	case sc.shared != nil && sc.shared(owner):
		return 1
	}
	return -1
}
