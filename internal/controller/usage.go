package controller

import (
	"context"
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
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
	u, err := c.readUsage(ctx, rec.ID, rec.Runtime)
	if err != nil {
		return runtime.Usage{}, nil, err
	}
	return u, c.toAPI(rec), nil
}

// connectedAgent is the agent client of sandbox id if the controller
// holds one (it runs and was reached), without starting or resolving it:
// the caller has looked the sandbox up already.
func (c *Controller) connectedAgent(id string) *client.Client {
	c.mu.Lock()
	e := c.entries[id]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.agent
}

// readUsage asks the sandbox's backend for its usage, or its agent when
// the backend says the agent knows (runtime.AgentUsageReporter: a pod's
// cgroup is on its node, not on the daemon's host). The agent is only
// asked while the sandbox runs; it is never woken for it.
func (c *Controller) readUsage(ctx context.Context, id, rt string) (runtime.Usage, error) {
	b, err := c.backend(rt)
	if err != nil {
		return runtime.Usage{}, err
	}
	if ur, ok := b.(runtime.UsageReader); ok {
		return ur.Usage(ctx, id)
	}
	if _, ok := b.(runtime.AgentUsageReporter); !ok {
		return runtime.Usage{}, fmt.Errorf("%s cannot report usage: %w", c.runtimeDesc(rt), errdefs.ErrFailedPrecondition)
	}
	ag := c.connectedAgent(id)
	if ag == nil {
		return runtime.Usage{}, fmt.Errorf("sandbox %s is not running or its agent is not reached yet; usage is only known while it runs: %w", id, errdefs.ErrFailedPrecondition)
	}
	w, err := ag.Usage(ctx)
	if err != nil {
		return runtime.Usage{}, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return runtime.Usage{CPUNanos: w.CPUNanos, MemoryBytes: w.MemoryBytes, MemoryCacheBytes: w.MemoryCacheBytes,
		MemoryLimitBytes: w.MemoryLimitBytes, DiskUsedBytes: w.DiskUsedBytes, DiskTotalBytes: w.DiskTotalBytes}, nil
}
