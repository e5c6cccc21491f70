package controller

import (
	"context"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/pools"
	"github.com/paddock-dev/paddock/internal/store"
)

// The core's side of warm pools (internal/controller/warmpools keeps their
// records and the loop that fills them): the sandboxes a pool holds are
// the core's, made from the pool's template and labelled as the pool's
// (a claim in the middle of a create takes one: templatecreate.go), and
// pools a backend keeps itself are driven from here (clusterpools.go).

// Labels of a pool's sandboxes that the pools subsystem reads.
const (
	// LabelPool names the pool a sandbox was made for.
	LabelPool = labelPool
	// LabelPoolReady is "starting" while a pool's sandbox starts, "true"
	// while it waits for a claim and "shrinking" once taken out to go;
	// a claimed sandbox has none.
	LabelPoolReady = labelPoolReady
	// LabelBuild is the build of the template a sandbox was made from.
	LabelBuild = labelBuild
)

// PoolState is the pools' bookkeeping in memory, shared by the core's
// claims and the pools subsystem.
func (c *Controller) PoolState() *pools.State { return c.pools }

// Now is the controller's clock (Options.Clock).
func (c *Controller) Now() time.Time { return c.opts.Clock() }

// CheckPoolResources refuses resources a pool's sandboxes could not get.
func (c *Controller) CheckPoolResources(r api.Resources) error {
	_, err := resolveResources(r, c.cfg.Defaults, c.cfg.Max)
	return err
}

// DestroyPooled destroys a pool's sandbox id for reason, whoever it
// belongs to.
func (c *Controller) DestroyPooled(ctx context.Context, id, reason string) error {
	return c.destroy(ctx, id, reason)
}

// LastActive is when the sandbox id was last used.
func (c *Controller) LastActive(id string) time.Time {
	return time.Unix(0, c.entry(id).activity.Load())
}

// Unpool takes the ready sandbox id out of its pool ("shrinking") under its
// lock, so that a claim never gets one about to go; false when a claim
// holds it or took it meanwhile.
func (c *Controller) Unpool(ctx context.Context, id string) bool {
	e := c.entry(id)
	if !e.mu.TryLock() {
		return false // being claimed
	}
	defer e.mu.Unlock()
	rec, err := c.opts.Store.GetSandbox(ctx, id)
	if err != nil || rec.Labels[labelPoolReady] != "true" {
		return false // gone, or claimed meanwhile
	}
	rec.Labels[labelPoolReady] = "shrinking"
	return c.opts.Store.UpdateSandbox(ctx, rec) == nil
}

// StartPooled creates a sandbox of pool p from its template tpl, under the
// pools' own caller (so that it counts against no real caller's quota
// until claimed), labelled "starting": not claimable until MarkPoolReady.
func (c *Controller) StartPooled(ctx context.Context, p *store.Pool, tpl *store.Template) (string, error) {
	ctx = WithCaller(context.WithoutCancel(ctx), poolCaller, api.KeyScopeAll)
	sb, err := c.createFromTemplate(ctx, api.CreateSandboxRequest{Resources: p.Resources}, tpl, map[string]string{
		labelPool: p.Name, labelPoolReady: "starting",
	})
	if err != nil {
		return "", err
	}
	return sb.ID, nil
}

// MarkPoolReady makes the pool's sandbox id claimable: its readiness check
// has passed.
func (c *Controller) MarkPoolReady(ctx context.Context, id string) error {
	return c.relabel(ctx, id, labelPoolReady, "true")
}

func (c *Controller) relabel(ctx context.Context, id, key, value string) error {
	rec, _, unlock, err := c.lockRecord(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	rec.Labels[key] = value
	if err := c.opts.Store.UpdateSandbox(ctx, rec); err != nil {
		return err
	}
	c.changed(rec, "", "", "")
	return nil
}
