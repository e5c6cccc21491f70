package templates

import (
	"context"
	"errors"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestMayReplace: a key of scope own replaces only the templates it built;
// the socket and keys of scope all replace any, and a template without a
// recorded builder is no own key's.
func TestMayReplace(t *testing.T) {
	ctx := context.Background()
	ownA := controller.WithCaller(ctx, "ka", api.KeyScopeOwn)
	ownB := controller.WithCaller(ctx, "kb", api.KeyScopeOwn)
	all := controller.WithCaller(ctx, "kops", api.KeyScopeAll)
	local := controller.System(ctx)
	for _, c := range []struct {
		name  string
		ctx   context.Context
		owner string
		ok    bool
	}{
		{"own key, its own", ownA, "ka", true},
		{"own key, another's", ownB, "ka", false},
		{"own key, the socket's", ownA, api.CallerLocal, false},
		{"own key, no builder kept", ownA, "", false},
		{"all key, an own key's", all, "ka", true},
		{"socket, an own key's", local, "ka", true},
		{"no caller", ctx, "", false},
	} {
		err := mayReplace(c.ctx, &store.Template{Name: "t", Owner: c.owner})
		if c.ok && err != nil || !c.ok && !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
