package controller

import (
	"context"
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// Usage reads a running or paused sandbox's resource use from its runtime.
// It does not count as activity: watching a sandbox must not keep it awake.
func (c *Controller) Usage(ctx context.Context, ref string) (runtime.Usage, *api.Sandbox, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return runtime.Usage{}, nil, err
	}
	if rec.State != api.StateRunning && rec.State != api.StatePaused {
		return runtime.Usage{}, nil, fmt.Errorf("sandbox %s is %s; usage is only known while it runs: %w", rec.ID, rec.State, errdefs.ErrFailedPrecondition)
	}
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return runtime.Usage{}, nil, err
	}
	ur, ok := b.(runtime.UsageReader)
	if !ok {
		return runtime.Usage{}, nil, fmt.Errorf("%s cannot report usage: %w", c.runtimeDesc(rec.Runtime), errdefs.ErrFailedPrecondition)
	}
	u, err := ur.Usage(ctx, rec.ID)
	if err != nil {
		return runtime.Usage{}, nil, err
	}
	return u, c.toAPI(rec), nil
}
