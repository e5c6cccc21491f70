package controller

import (
	"context"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/periodic"
)

// stateCounts counts the live sandboxes by state.
func (c *Controller) stateCounts(ctx context.Context) (map[string]int, error) {
	recs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, r := range recs {
		counts[r.State]++
	}
	return counts, nil
}

// RunStats samples the sandboxes' states once a minute for HostStats (internal/controller/stats),
// until ctx ends.
func (c *Controller) RunStats(ctx context.Context) {
	periodic.Run(ctx, time.Minute, func(ctx context.Context) {
		if counts, err := c.stateCounts(ctx); err == nil {
			c.stats.Sampled(time.Now(), counts)
		}
	})
}

// HostStats is the last hour's figures, for an operator: they count
// every tenant's sandboxes.
func (c *Controller) HostStats(ctx context.Context) (*api.HostStats, error) {
	if err := requireScopeAll(ctx, "the host's figures"); err != nil {
		return nil, err
	}
	now := time.Now()
	counts, err := c.stateCounts(ctx)
	if err != nil {
		return nil, err
	}
	c.stats.Sampled(now, counts)
	return &api.HostStats{Minutes: c.stats.Window(now), States: counts}, nil
}
