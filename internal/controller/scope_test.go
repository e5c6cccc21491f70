package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// TestMaySee is the visibility rule, whole: every caller kind against
// every owner kind.
func TestMaySee(t *testing.T) {
	const keyA, keyB = "0123456789abcdef", "fedcba9876543210"
	tests := []struct {
		name                 string
		caller, scope, owner string
		want                 bool
	}{
		{"own key, its own", keyA, api.KeyScopeOwn, keyA, true},
		{"own key, another key's", keyA, api.KeyScopeOwn, keyB, false},
		{"own key, the socket's", keyA, api.KeyScopeOwn, api.CallerLocal, false},
		{"own key, older than owners", keyA, api.KeyScopeOwn, "", false},
		{"own key, the pool's", keyA, api.KeyScopeOwn, poolCaller, false},
		{"unknown scope counts as own", keyA, "everything", keyB, false},
		{"empty scope counts as own", keyA, "", keyB, false},
		{"all key, another key's", keyA, api.KeyScopeAll, keyB, true},
		{"all key, older than owners", keyA, api.KeyScopeAll, "", true},
		{"all key, the socket's", keyA, api.KeyScopeAll, api.CallerLocal, true},
		{"socket, a key's", api.CallerLocal, api.KeyScopeAll, keyB, true},
		{"socket is all whatever the scope says", api.CallerLocal, api.KeyScopeOwn, keyB, true},
		{"socket, older than owners", api.CallerLocal, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maySee(tt.caller, tt.scope, tt.owner); got != tt.want {
				t.Errorf("maySee(%q, %q, %q) = %v, want %v", tt.caller, tt.scope, tt.owner, got, tt.want)
			}
			// The context form agrees with the rule.
			ctx := WithCaller(context.Background(), tt.caller, tt.scope)
			if got := visible(ctx, tt.owner); got != tt.want {
				t.Errorf("visible(WithCaller(%q, %q), %q) = %v, want %v", tt.caller, tt.scope, tt.owner, got, tt.want)
			}
		})
	}
}

// TestCallerScope: a context without a caller (or with an empty one) is
// no one, of no scope, and sees nothing; System is the local caller of
// scope all; a key's scope is all only when it says exactly that.
func TestCallerScope(t *testing.T) {
	tests := []struct {
		name       string
		ctx        context.Context
		wantCaller string
		wantScope  string
	}{
		{"no caller", context.Background(), "", ""},
		{"the daemon's own work", System(context.Background()), api.CallerLocal, api.KeyScopeAll},
		{"own key", WithCaller(context.Background(), "k1", api.KeyScopeOwn), "k1", api.KeyScopeOwn},
		{"all key", WithCaller(context.Background(), "k1", api.KeyScopeAll), "k1", api.KeyScopeAll},
		{"unknown scope", WithCaller(context.Background(), "k1", "ALL"), "k1", api.KeyScopeOwn},
		{"empty id is no one", WithCaller(context.Background(), "", api.KeyScopeAll), "", ""},
		{"the socket named", WithCaller(context.Background(), api.CallerLocal, api.KeyScopeOwn), api.CallerLocal, api.KeyScopeAll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Caller(tt.ctx); got != tt.wantCaller {
				t.Errorf("Caller = %q, want %q", got, tt.wantCaller)
			}
			if got := CallerScope(tt.ctx); got != tt.wantScope {
				t.Errorf("CallerScope = %q, want %q", got, tt.wantScope)
			}
			if tt.wantCaller == "" {
				// No one sees nothing, not even what belongs to no one,
				// and may create nothing.
				for _, owner := range []string{"", api.CallerLocal, "k1"} {
					if visible(tt.ctx, owner) {
						t.Errorf("visible(%q) = true without a caller", owner)
					}
				}
				if _, err := pickNamed(tt.ctx, "sandbox", "dev", []string{"", "k1"}, func(s string) string { return s }); !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("pickNamed without a caller = %v, want not found", err)
				}
				if err := requireCaller(tt.ctx); !errors.Is(err, errdefs.ErrUnauthenticated) {
					t.Errorf("requireCaller = %v, want unauthenticated", err)
				}
			}
			err := requireScopeAll(tt.ctx, "deleting a pool")
			if (tt.wantScope == api.KeyScopeAll) != (err == nil) {
				t.Errorf("requireScopeAll = %v with scope %s", err, tt.wantScope)
			}
			if err != nil && !errors.Is(err, errdefs.ErrPermissionDenied) {
				t.Errorf("requireScopeAll = %v, want permission denied", err)
			}
		})
	}
}

// TestPickNamed: what a name means to each kind of caller when owners
// share it: an own key only ever its own, an all caller its own first,
// then the only other, and a conflict naming no owner when several hold it.
func TestPickNamed(t *testing.T) {
	const keyA, keyB, ops = "0123456789abcdef", "fedcba9876543210", "00000000000000aa"
	type thing struct{ id, owner string }
	owner := func(x thing) string { return x.owner }
	a, b, o, l := thing{"sb-a", keyA}, thing{"sb-b", keyB}, thing{"sb-o", ops}, thing{"sb-l", api.CallerLocal}
	tests := []struct {
		name          string
		caller, scope string
		held          []thing
		want          string
		err           error
	}{
		{"own key, its own among others", keyA, api.KeyScopeOwn, []thing{b, a, o}, "sb-a", nil},
		{"own key, only another's", keyA, api.KeyScopeOwn, []thing{b}, "", errdefs.ErrNotFound},
		{"own key, only the socket's", keyA, api.KeyScopeOwn, []thing{l}, "", errdefs.ErrNotFound},
		{"own key, none", keyA, api.KeyScopeOwn, nil, "", errdefs.ErrNotFound},
		{"all key, its own first", ops, api.KeyScopeAll, []thing{a, b, o}, "sb-o", nil},
		{"all key, the only holder", ops, api.KeyScopeAll, []thing{b}, "sb-b", nil},
		{"all key, two holders", ops, api.KeyScopeAll, []thing{a, b}, "", errdefs.ErrConflict},
		{"socket, its own first", api.CallerLocal, "", []thing{a, l, b}, "sb-l", nil},
		{"socket, two holders", api.CallerLocal, "", []thing{a, b}, "", errdefs.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := WithCaller(context.Background(), tt.caller, tt.scope)
			got, err := pickNamed(ctx, "sandbox", "dev", tt.held, owner)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) || got.id != tt.want {
				t.Fatalf("pickNamed = %q, %v; want %q, %v", got.id, err, tt.want, tt.err)
			}
			if err != nil && (strings.Contains(err.Error(), keyA) || strings.Contains(err.Error(), keyB) || strings.Contains(err.Error(), "sb-")) {
				t.Errorf("the error names an owner or a sandbox: %v", err)
			}
			if errors.Is(err, errdefs.ErrNotFound) && err.Error() != errdefs.NotFound("sandbox %q", "dev").Error() {
				t.Errorf("not found %q differs from a name nobody holds", err)
			}
		})
	}
}
