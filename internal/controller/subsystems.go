package controller

import (
	"context"
)

// What the subsystem packages beside the core (internal/controller/...,
// such as workspaces) use of it besides the Controller's methods: the
// caller's identity and scope, and the rules for ids, so that every kind
// of object is owned, named and seen the same way (the shapes of names
// and durations are internal/controller/rules, beneath the core).

// RequireCaller refuses ctx when it carries no caller.
func RequireCaller(ctx context.Context) error { return requireCaller(ctx) }

// Visible says whether ctx's caller may see what owner owns.
func Visible(ctx context.Context, owner string) bool { return visible(ctx, owner) }

// PickNamed picks, among the objects held under a name, the one ctx's
// caller means: its own (or, for a key of scope all, the only one);
// another owner's is not found.
func PickNamed[T any](ctx context.Context, what, name string, held []T, owner func(T) string) (T, error) {
	return pickNamed(ctx, what, name, held, owner)
}

// NewID returns a new object id.
func NewID() string { return newID() }

// IsID says whether s has the form of an object id.
func IsID(s string) bool { return idRE.MatchString(s) }

// ValidRef says whether s can be an id or a name at all.
func ValidRef(s string) bool { return validRef(s) }

// RecordedSandbox finds the sandbox ref names that ctx's caller may see: a
// live one first, then a destroyed one whose ledger is still kept.
func (c *Controller) RecordedSandbox(ctx context.Context, ref string) (id, name string, err error) {
	return c.ledgerTarget(ctx, ref)
}

// RequireScopeAll refuses, to a key of scope own, an operation on what all
// callers share (images, templates, pools).
func RequireScopeAll(ctx context.Context, what string) error { return requireScopeAll(ctx, what) }
