package controller

import (
	"context"
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/controller/pools"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// A pool whose sandboxes run on a backend that keeps warm pools itself
// (runtime.WarmPooler: agent-sandbox's SandboxWarmPool on Kubernetes) is
// kept there: the pool loop sets its size on the backend instead of
// starting pooled sandboxes, and a create from the pool is an ordinary
// create whose first start takes a ready sandbox from the backend's pool.
// The sandbox is recorded at the claim, under its caller, as a cold create
// is. A template's start command is run by the pool's agents at boot,
// which check its readiness themselves (runtime.Spec.Start); a claim waits
// for the same check.
//
// A template whose files come from build steps has its pool there too on
// a backend that does not stack this host's layers (Kubernetes): the
// pool's pods run the template's image (its layers stacked on its base,
// templateimage.go, ImageLayers saying how many), whose home files the
// backend puts into each pod's home before the agent starts, so the start
// command finds them. On a backend that stacks layers itself the pool
// stays Paddock's own.

// labelClusterPool marks a sandbox taken from a backend's warm pool, with
// the pool's name; its first start claims from that pool.
const labelClusterPool = "paddock.dev/cluster-pool"

// ClusterPool returns the backend that keeps p's pool, if one does.
func (c *Controller) ClusterPool(p *store.Pool, tpl *store.Template) (runtime.WarmPooler, bool) {
	if tpl == nil {
		return nil, false
	}
	b, err := c.backend(c.templateRuntime(tpl))
	if err != nil {
		return nil, false
	}
	if len(tpl.Layers) > 0 && stacksLayers(b) { // templates.go
		return nil, false
	}
	wp, ok := b.(runtime.WarmPooler)
	return wp, ok
}

func (c *Controller) templateRuntime(tpl *store.Template) string {
	if tpl.Spec.Runtime != "" {
		return tpl.Spec.Runtime
	}
	return c.cfg.DefaultRuntime
}

// TendClusterPool sets p's size on the backend that keeps it: its
// target, min_ready or more after a burst of creates (pools/demand.go), as
// for Paddock's own pools. The backend makes and removes the pods.
func (c *Controller) TendClusterPool(ctx context.Context, wp runtime.WarmPooler, p *store.Pool, tpl *store.Template) {
	target := pools.Target(p.MinReady, p.MaxReady, c.pools.Peak(p.Name, c.opts.Clock()))
	spec, err := c.clusterPoolSpec(ctx, p, tpl)
	if err == nil {
		err = wp.SetWarmPool(ctx, p.Name, spec, target)
	}
	if err != nil {
		c.log.Warn("pool on the cluster", "pool", p.Name, "err", err)
		c.pools.SetError(p.Name, err.Error())
		return
	}
	// A pool whose pods do not become ready says why (pool ls).
	problem := ""
	if d, ok := wp.(runtime.WarmPoolDiagnoser); ok {
		problem = d.WarmPoolProblem(ctx, p.Name)
	}
	if c.pools.Error(p.Name) != problem && problem != "" {
		c.log.Warn("pool on the cluster", "pool", p.Name, "problem", problem)
	}
	c.pools.SetError(p.Name, problem)
	if prev, had := c.pools.SetClusterSize(p.Name, target); had && prev != target {
		c.log.Info("pool on the cluster resized", "pool", p.Name, "from", prev, "to", target, "min_ready", p.MinReady, "max_ready", p.MaxReady)
	}
}

// clusterPoolSpec is what the backend's pool keeps ready: the template's
// image (with its build layers, as podImage picks for a cold create), env
// and the pool's size, as a cold create from the template would start.
func (c *Controller) clusterPoolSpec(ctx context.Context, p *store.Pool, tpl *store.Template) (runtime.Spec, error) {
	base, err := c.image(ctx, tpl.ImageDigest)
	if err != nil {
		return runtime.Spec{}, fmt.Errorf("pool %s: its template's image: %w", p.Name, err)
	}
	img, err := c.stackLayers(base, tpl.Name, tpl.Layers) // templateimage.go
	if err != nil {
		return runtime.Spec{}, fmt.Errorf("pool %s: template %s: %w", p.Name, tpl.Name, err)
	}
	if err := c.pushImage(ctx, img); err != nil { // templateimage.go
		return runtime.Spec{}, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	res, err := c.sizeResources("", p.Resources)
	if err != nil {
		return runtime.Spec{}, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	spec := runtime.Spec{
		Image:       runtime.ImageRef{Name: img.Name, Digest: img.Digest},
		ImageLayers: len(tpl.Layers),
		Env:         withDefaults(imageEnv(base, tpl.Spec.Env), tpl.Spec.User, tpl.Spec.Cwd), // images.go
		Resources:   runtimeResources(res),
	}
	if len(tpl.Spec.Start) > 0 {
		st := &wire.StartSpec{Cmd: tpl.Spec.Start, Cwd: tpl.Spec.Cwd, User: startUser(tpl)}
		if r := tpl.Spec.Ready; r != nil {
			st.ReadyPort, st.ReadyLog = r.Port, r.Log
			timeout, err := readyTimeout(r)
			if err != nil {
				return runtime.Spec{}, fmt.Errorf("pool %s: template %s: %w", p.Name, tpl.Name, err)
			}
			st.ReadyTimeoutMs = timeout.Milliseconds()
		}
		spec.Start = st
	}
	return spec, nil
}

// claimCluster creates a sandbox for req from p's pool on the backend, or
// returns nil, nil when the pool has none ready (the caller then creates
// it cold).
func (c *Controller) claimCluster(ctx context.Context, wp runtime.WarmPooler, p *store.Pool, tpl *store.Template, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	ready, err := wp.WarmPoolReady(ctx, p.Name)
	if err != nil || ready == 0 {
		return nil, nil
	}
	extra := map[string]string{labelPool: p.Name, labelClusterPool: p.Name}
	if req.Identifier != "" {
		extra[labelIdentifier] = req.Identifier
	}
	if p.Cooldown > 0 {
		req.KeepAlive = true
	}
	if req.Resources == (api.Resources{}) {
		req.Resources = p.Resources // the size its pod was made with
	}
	req.Pool, req.Identifier = "", ""
	sb, err := c.createFromTemplate(ctx, req, tpl, extra)
	if err != nil {
		return nil, err
	}
	c.pools.Served(p.Name)
	c.log.Info("served from the cluster's pool", "pool", p.Name, "sandbox", sb.ID, "name", sb.Name)
	return sb, nil
}

// ClusterPoolReady is how many sandboxes p's pool on the backend holds
// ready (0 when the backend cannot say).
func (c *Controller) ClusterPoolReady(ctx context.Context, wp runtime.WarmPooler, p *store.Pool) int {
	n, err := wp.WarmPoolReady(ctx, p.Name)
	if err != nil {
		return 0
	}
	return n
}

// RemoveClusterPools deletes the backends' pools that no pool of the
// store keeps there any more (deleted, or moved to another runtime or
// to Paddock's own pool).
func (c *Controller) RemoveClusterPools(ctx context.Context, keep map[string]runtime.WarmPooler) {
	for _, b := range c.opts.Backends {
		wp, ok := b.(runtime.WarmPooler)
		if !ok {
			continue
		}
		names, err := wp.WarmPools(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("list the cluster's pools", "err", err)
			}
			continue
		}
		for _, n := range names {
			if keep[n] == wp {
				continue
			}
			if err := wp.DeleteWarmPool(ctx, n); err != nil {
				c.log.Warn("remove the cluster's pool", "pool", n, "err", err)
				continue
			}
			c.pools.ForgetClusterSize(n)
			c.log.Info("removed the cluster's pool", "pool", n, "runtime", b.Name())
		}
	}
}

// RemoveClusterPool deletes the pool name from every backend that keeps
// pools; its sandboxes already served keep running.
func (c *Controller) RemoveClusterPool(ctx context.Context, name string) {
	c.pools.ForgetClusterSize(name)
	for _, b := range c.opts.Backends {
		if wp, ok := b.(runtime.WarmPooler); ok {
			if err := wp.DeleteWarmPool(ctx, name); err != nil {
				c.log.Warn("remove the cluster's pool", "pool", name, "err", err)
			}
		}
	}
}

// runtimeResources is a sandbox's size as backends take it.
func runtimeResources(r api.Resources) runtime.Resources {
	return runtime.Resources{
		CPUMillis:   int64(r.CPU * 1000),
		MemoryBytes: r.MemoryMB << 20,
		DiskBytes:   r.DiskMB << 20,
		Pids:        r.Pids,
	}
}
