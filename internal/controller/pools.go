package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/pools"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// SetPool creates or changes a warm pool.
func (c *Controller) SetPool(ctx context.Context, name string, req api.SetPoolRequest) (*api.Pool, error) {
	if err := requireScopeAll(ctx, "setting a pool"); err != nil { // scope.go
		return nil, err
	}
	if !rules.ValidName(name) {
		return nil, errdefs.Invalid("pool name %q: use 1-63 letters, digits, '-', '_' or '.'", rules.Truncate(name, 80))
	}
	if req.MinReady < 0 || req.MinReady > api.MaxPoolMinReady {
		return nil, errdefs.Invalid("min_ready %d: want 0 to %d", req.MinReady, api.MaxPoolMinReady)
	}
	if req.MaxReady != 0 && (req.MaxReady < req.MinReady || req.MaxReady > api.MaxPoolMaxReady) {
		return nil, errdefs.Invalid("max_ready %d: want 0 (the pool does not grow) or min_ready (%d) to %d", req.MaxReady, req.MinReady, api.MaxPoolMaxReady)
	}
	cooldown, err := rules.ParseDuration("cooldown", req.Cooldown, time.Second)
	if err != nil {
		return nil, err
	}
	if req.Template == "" {
		return nil, errdefs.Invalid("a pool needs a template")
	}
	tname, ok := rules.TemplateRef(req.Template)
	if !ok {
		return nil, errdefs.Invalid("template name %q is not valid (a name, or a name and a tag as name:tag)", rules.Truncate(req.Template, 80))
	}
	req.Template = tname
	if _, err := c.opts.Store.GetTemplate(ctx, req.Template); err != nil {
		return nil, err
	}
	if _, err := resolveResources(req.Resources, c.cfg.Defaults, c.cfg.Max); err != nil {
		return nil, err
	}
	rec := &store.Pool{Name: name, Template: req.Template, MinReady: req.MinReady, MaxReady: req.MaxReady, Cooldown: cooldown, Resources: req.Resources}
	if old, err := c.opts.Store.GetPool(ctx, name); err == nil {
		rec.CreatedAt = old.CreatedAt
	}
	if err := c.opts.Store.PutPool(ctx, rec); err != nil {
		return nil, err
	}
	c.pools.RefillSucceeded(name) // a changed pool tries at once
	c.log.Info("pool set", "pool", name, "template", req.Template, "min_ready", req.MinReady, "max_ready", req.MaxReady, "cooldown", cooldown)
	c.pools.Kick()
	return c.poolAPI(ctx, rec)
}

// GetPool returns a pool and its state.
func (c *Controller) GetPool(ctx context.Context, name string) (*api.Pool, error) {
	if !rules.ValidName(name) {
		return nil, errdefs.Invalid("pool name %q is not valid", rules.Truncate(name, 80))
	}
	p, err := c.opts.Store.GetPool(ctx, name)
	if err != nil {
		return nil, err
	}
	return c.poolAPI(ctx, p)
}

// ListPools lists pools and their state.
func (c *Controller) ListPools(ctx context.Context) ([]api.Pool, error) {
	ps, err := c.opts.Store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Pool{}
	for _, p := range ps {
		a, err := c.poolAPI(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	return out, nil
}

// DeletePool removes a pool and destroys its unclaimed sandboxes;
// sandboxes already served keep running.
func (c *Controller) DeletePool(ctx context.Context, name string) error {
	if err := requireScopeAll(ctx, "deleting a pool"); err != nil {
		return err
	}
	if !rules.ValidName(name) {
		return errdefs.Invalid("pool name %q is not valid", rules.Truncate(name, 80))
	}
	if err := c.opts.Store.DeletePool(ctx, name); err != nil {
		return err
	}
	// Refills in flight finish first, so that what they made goes too
	// and the pool leaves nothing behind when this returns.
	c.waitRefills(ctx, name, refillWait)
	members, err := c.opts.Store.ListSandboxes(ctx, map[string]string{labelPool: name})
	if err != nil {
		return err
	}
	for _, sb := range members {
		if _, unclaimed := sb.Labels[labelPoolReady]; !unclaimed {
			continue // served: it is the caller's now
		}
		if err := c.destroy(ctx, sb.ID, "pool deleted"); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			c.log.Warn("destroy pooled sandbox", "sandbox", sb.ID, "err", err)
		}
	}
	c.removeClusterPool(ctx, name) // clusterpools.go
	c.pools.Forget(name)
	c.log.Info("pool deleted", "pool", name)
	return nil
}

// refillWait bounds how long deleting a pool waits for its refills in
// flight (a template's readiness check can take a while); a refill that
// ends later leaves a sandbox the pool loop removes on its next pass.
const refillWait = time.Minute

// waitRefills waits until pool has no refill in flight, at most limit.
func (c *Controller) waitRefills(ctx context.Context, pool string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		n := c.pools.Starting(pool)
		if n == 0 || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Controller) poolAPI(ctx context.Context, p *store.Pool) (*api.Pool, error) {
	ready, err := c.opts.Store.ListSandboxes(ctx, map[string]string{labelPool: p.Name, labelPoolReady: "true"})
	if err != nil {
		return nil, err
	}
	out := &api.Pool{
		Name: p.Name, Template: p.Template, MinReady: p.MinReady, MaxReady: p.MaxReady, Resources: p.Resources,
		CreatedAt: p.CreatedAt,
	}
	out.Target = pools.Target(p.MinReady, p.MaxReady, c.pools.Peak(p.Name, c.opts.Clock()))
	for _, sb := range ready {
		if sb.State == api.StateRunning {
			out.Ready++
		}
	}
	if tpl, err := c.opts.Store.GetTemplate(ctx, p.Template); err == nil {
		if wp, ok := c.clusterPool(p, tpl); ok {
			out.Ready = c.clusterPoolReady(ctx, wp, p) // clusterpools.go
		}
	}
	if p.Cooldown > 0 {
		out.Cooldown = p.Cooldown.String()
	}
	st := c.pools.Stats(p.Name)
	out.Starting, out.Served, out.Cold, out.Error = st.Starting, st.Served, st.Cold, st.Error
	return out, nil
}

// RunPools keeps every pool at its target (min_ready, or more after a
// burst: pools/demand.go), replaces stale pooled sandboxes
// and applies cooldowns until ctx ends. Its first pass reconciles what a
// previous daemon left: pooled sandboxes that no longer match are removed.
func (c *Controller) RunPools(ctx context.Context) {
	wake := c.pools.Wake()
	c.removeOrphanBuilders(ctx, time.Now())
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		c.poolPass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

func (c *Controller) poolPass(ctx context.Context) {
	pools, err := c.opts.Store.ListPools(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("pools", "err", err)
		}
		return
	}
	known := map[string]bool{}
	onCluster := map[string]runtime.WarmPooler{}
	for _, p := range pools {
		known[p.Name] = true
		if wp := c.tendPool(ctx, p); wp != nil {
			onCluster[p.Name] = wp
		}
	}
	c.removeClusterPools(ctx, onCluster) // clusterpools.go
	// Unclaimed sandboxes of pools that no longer exist.
	all, err := c.opts.Store.ListSandboxes(ctx, map[string]string{labelPoolReady: "true"})
	if err != nil {
		return
	}
	for _, sb := range all {
		if !known[sb.Labels[labelPool]] {
			_ = c.destroy(ctx, sb.ID, "pool deleted")
		}
	}
}

// tendPool keeps p at its size; it returns the backend that keeps p's
// pool when one does (clusterpools.go).
func (c *Controller) tendPool(ctx context.Context, p *store.Pool) runtime.WarmPooler {
	tpl, terr := c.opts.Store.GetTemplate(ctx, p.Template)
	if terr != nil && !errors.Is(terr, errdefs.ErrNotFound) {
		return nil
	}
	members, err := c.opts.Store.ListSandboxes(ctx, map[string]string{labelPool: p.Name})
	if err != nil {
		return nil
	}
	wp, onCluster := c.clusterPool(p, tpl)
	ready := 0
	var readyIDs []string
	now := time.Now()
	for _, sb := range members {
		if sb.Labels[labelPoolReady] == "starting" {
			// Left by a daemon that stopped mid-refill.
			inFlight := c.pools.Starting(p.Name) > 0
			if inFlight {
				continue
			}
			// The list may predate a refill that has since ended: the
			// record is read again (a refill relabels its sandbox
			// before it stops counting as one).
			cur, err := c.opts.Store.GetSandbox(ctx, sb.ID)
			if err != nil {
				continue
			}
			if cur.Labels[labelPoolReady] == "starting" {
				if cur.State != api.StateCreating {
					_ = c.destroy(ctx, sb.ID, "pooled sandbox never became ready")
				}
				continue
			}
			sb = cur // readied since the list
		}
		if sb.Labels[labelPoolReady] == "shrinking" {
			_ = c.destroy(ctx, sb.ID, "pool shrinks after a burst")
			continue
		}
		if sb.Labels[labelPoolReady] != "true" {
			// Served: the cooldown destroys it once idle that long.
			if p.Cooldown > 0 && sb.State == api.StateRunning {
				idle := now.Sub(time.Unix(0, c.entry(sb.ID).activity.Load()))
				if idle >= p.Cooldown {
					c.log.Info("pool cooldown", "pool", p.Name, "sandbox", sb.ID, "idle", idle.Round(time.Second))
					_ = c.destroy(ctx, sb.ID, "pool cooldown")
				}
			}
			continue
		}
		stale := tpl == nil || sb.Labels[labelBuild] != tpl.BuildID || sb.State != api.StateRunning || onCluster
		if stale && sb.State != api.StateCreating {
			_ = c.destroy(ctx, sb.ID, "pooled sandbox is stale")
			continue
		}
		if !stale {
			ready++
			readyIDs = append(readyIDs, sb.ID)
		}
	}
	if tpl == nil {
		c.pools.SetError(p.Name, fmt.Sprintf("template %q was deleted; the pool cannot refill", p.Template))
		return nil
	}
	if onCluster {
		c.tendClusterPool(ctx, wp, p, tpl)
		return wp
	}
	c.pools.OfferReady(p.Name, readyIDs...)
	target := pools.Target(p.MinReady, p.MaxReady, c.pools.Peak(p.Name, c.opts.Clock()))
	c.shrinkPool(ctx, p, readyIDs, target)
	// None while its last refill's failure waits (pools/retry.go).
	need := c.pools.Reserve(p.Name, target, ready, now)
	for i := 0; i < need; i++ {
		go c.refill(WithCaller(context.WithoutCancel(ctx), poolCaller, api.KeyScopeAll), p, tpl)
	}
	return nil
}

// shrinkPool destroys ready sandboxes above target, a few per pass (the
// newest first, which the list gives last), once a burst that grew the
// pool has passed out of its memory. A sandbox is first taken out of the
// pool under its lock, so a claim never gets one that is going.
func (c *Controller) shrinkPool(ctx context.Context, p *store.Pool, readyIDs []string, target int) {
	excess := min(len(readyIDs)-target, pools.MaxRefillsInFlight)
	for i := 0; i < excess; i++ {
		id := readyIDs[len(readyIDs)-1-i]
		e := c.entry(id)
		if !e.mu.TryLock() {
			continue // being claimed
		}
		rec, err := c.opts.Store.GetSandbox(ctx, id)
		if err == nil && rec.Labels[labelPoolReady] == "true" {
			rec.Labels[labelPoolReady] = "shrinking"
			err = c.opts.Store.UpdateSandbox(ctx, rec)
		} else if err == nil {
			err = errdefs.ErrConflict // claimed meanwhile
		}
		e.mu.Unlock()
		if err != nil {
			continue
		}
		c.log.Info("pool shrinks", "pool", p.Name, "sandbox", id, "target", target)
		_ = c.destroy(ctx, id, "pool shrinks after a burst")
	}
}

func (c *Controller) refill(ctx context.Context, p *store.Pool, tpl *store.Template) {
	defer func() {
		c.pools.RefillDone(p.Name)
	}()
	sb, err := c.createFromTemplate(ctx, api.CreateSandboxRequest{Resources: p.Resources}, tpl, map[string]string{
		labelPool: p.Name, labelPoolReady: "starting",
	})
	if err == nil {
		// Claimable only now that its readiness check has passed.
		err = c.relabel(ctx, sb.ID, labelPoolReady, "true")
	}
	if err != nil {
		wait := c.pools.RefillFailed(p.Name, time.Now())
		time.AfterFunc(wait, c.pools.Kick)
		c.log.Warn("pool refill", "pool", p.Name, "err", err, "retry_in", wait)
		c.pools.SetError(p.Name, err.Error())
		return
	}
	c.pools.RefillSucceeded(p.Name)
	c.pools.OfferReady(p.Name, sb.ID)
	// A refill that started before its template was deleted may end after
	// the pool said so: it must not clear that (the next pass destroys
	// the sandbox it made, as stale).
	if _, err := c.opts.Store.GetTemplate(ctx, p.Template); errors.Is(err, errdefs.ErrNotFound) {
		return
	}
	c.pools.SetError(p.Name, "")
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

// removeOrphanBuilders destroys build sandboxes a previous daemon left
// behind mid-build: no build of this daemon started before before.
func (c *Controller) removeOrphanBuilders(ctx context.Context, before time.Time) {
	list, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		return
	}
	for _, sb := range list {
		live := c.pools.Building(sb.ID)
		if _, ok := sb.Labels[labelBuilder]; ok && !live && sb.CreatedAt.Before(before) {
			c.log.Info("removing build sandbox left by an earlier daemon", "sandbox", sb.ID)
			_ = c.destroy(ctx, sb.ID, "template build was interrupted")
		}
	}
}
