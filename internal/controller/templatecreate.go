package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// startProcessID is the background process id of a template's start command.
const startProcessID = wire.StartProcessID

// defaultReadyTimeout is how long a readiness check waits by default.
const defaultReadyTimeout = wire.DefaultReadyTimeout

// createTemplated serves a create that names a template, a pool or an
// identifier: from a ready pooled sandbox when one matches, otherwise cold.
func (c *Controller) createTemplated(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	if hasReservedLabel(req.Labels) {
		return nil, errdefs.Invalid("the labels %s, %s, %s, %s, %s, %s, %s, %s and %s are reserved for Paddock", labelTemplate, labelBuild, labelBuilder, labelPool, labelPoolReady, labelIdentifier, labelClusterPool, labelDefaultUser, labelDefaultCwd)
	}
	if req.Identifier != "" && req.Pool == "" {
		return nil, errdefs.Invalid("identifier needs a pool")
	}
	if req.Identifier != "" && !rules.ValidName(req.Identifier) {
		return nil, errdefs.Invalid("identifier %q: use 1-63 letters, digits, '-', '_' or '.'", rules.Truncate(req.Identifier, 80))
	}
	if req.FromSnapshot != "" || req.Image != "" {
		return nil, errdefs.Invalid("a sandbox from a template or pool takes its files from the template: leave image and from_snapshot out")
	}
	var pool *store.Pool
	if req.Pool != "" {
		if !rules.ValidName(req.Pool) {
			return nil, errdefs.Invalid("pool name %q is not valid", rules.Truncate(req.Pool, 80))
		}
		p, err := c.opts.Store.GetPool(ctx, req.Pool)
		if err != nil {
			return nil, err
		}
		if req.Template != "" && req.Template != p.Template {
			return nil, errdefs.Invalid("pool %s keeps template %s, not %s", p.Name, p.Template, rules.Truncate(req.Template, 80))
		}
		req.Template, pool = p.Template, p
	}
	tname, ok := rules.TemplateRef(req.Template)
	if !ok {
		return nil, errdefs.Invalid("template name %q is not valid (a name, or a name and a tag as name:tag)", rules.Truncate(req.Template, 80))
	}
	req.Template = tname
	tpl, err := c.opts.Store.GetTemplate(ctx, req.Template)
	if err != nil {
		if pool != nil && errors.Is(err, errdefs.ErrNotFound) {
			return nil, fmt.Errorf("pool %s: its template %s was deleted: %w", pool.Name, pool.Template, errdefs.ErrFailedPrecondition)
		}
		return nil, err
	}
	if req.Identifier != "" {
		mu := c.pools.IdentifierLock(pool.Name)
		mu.Lock()
		defer mu.Unlock()
		bound, err := c.opts.Store.ListSandboxes(ctx, map[string]string{labelPool: pool.Name, labelIdentifier: req.Identifier})
		if err != nil {
			return nil, err
		}
		for _, sb := range bound {
			// Identifiers are the caller's own: another API key's X is another binding.
			if sb.KeyID == Caller(ctx) && sb.State != api.StateError && sb.State != api.StateDestroying {
				c.touch(sb.ID)
				return c.Get(ctx, sb.ID)
			}
		}
	}
	sb, err := c.spawnTemplated(ctx, req, pool, tpl)
	if err == nil {
		c.countSpawn(ctx, tpl.Name)
	}
	return sb, err
}

// countSpawn counts a sandbox handed out from template (E2B's spawnCount
// and lastSpawnedAt); a count that fails is logged, not the create's
// failure.
func (c *Controller) countSpawn(ctx context.Context, template string) {
	if err := c.opts.Store.TemplateSpawned(context.WithoutCancel(ctx), template, c.opts.Clock()); err != nil {
		c.log.Warn("count a sandbox of a template", "template", template, "err", err)
	}
}

// spawnTemplated creates req's sandbox from tpl: from a ready sandbox of
// pool (or of a pool of tpl of its size) when one is, otherwise cold.
func (c *Controller) spawnTemplated(ctx context.Context, req api.CreateSandboxRequest, pool *store.Pool, tpl *store.Template) (*api.Sandbox, error) {
	if pool == nil && poolable(req) {
		pool = c.poolFor(ctx, req.Template, req.Resources)
	}
	if pool != nil && poolable(req) && sameResources(pool.Resources, req.Resources) {
		c.pools.Arrived(pool.Name, c.opts.Clock())
		if wp, ok := c.ClusterPool(pool, tpl); ok { // clusterpools.go
			// The pool loop sizes the backend's pool from the demand.
			c.pools.KickAfterClaim()
			// A pod of the cluster's pool started without the egress
			// proxy's settings, which a running pod cannot be given: a
			// sandbox with egress is created cold.
			if egressRequested(req) {
				c.log.Debug("a create with egress is not served from the cluster's pool", "pool", pool.Name)
			} else if sb, err := c.claimCluster(ctx, wp, pool, tpl, req); err != nil || sb != nil {
				return sb, err
			}
		} else if sb, err := c.claim(ctx, pool, tpl, req); err != nil || sb != nil {
			return sb, err
		}
		c.pools.Cold(pool.Name)
		c.stats.Pool(time.Now(), false)
	}
	extra := map[string]string{}
	if pool != nil {
		extra[labelPool] = pool.Name
		if req.Identifier != "" {
			extra[labelIdentifier] = req.Identifier
		}
	}
	if pool != nil && pool.Cooldown > 0 {
		req.KeepAlive = true
	}
	req.Pool, req.Identifier = "", ""
	return c.createFromTemplate(ctx, req, tpl, extra)
}

// poolable says whether a request may be served by a pooled sandbox: one
// that was started before the request, so it cannot take the request's
// env, runtime, size preset or lifetime settings.
func poolable(req api.CreateSandboxRequest) bool {
	return len(req.Env) == 0 && req.Runtime == "" && req.SleepAfter == "" && req.Timeout == "" && req.OnIdle == "" && req.Size == ""
}

// egressRequested says whether req asks for network egress (rules alone
// imply it).
func egressRequested(req api.CreateSandboxRequest) bool {
	n := req.Network
	return n != nil && (n.Mode == api.NetworkEgress || len(n.AllowHosts) > 0 || len(n.DenyHosts) > 0 || len(n.AllowCIDRs) > 0 || len(n.DenyCIDRs) > 0)
}

func sameResources(a, b api.Resources) bool {
	return b == (api.Resources{}) || reflect.DeepEqual(a, b)
}

// poolFor finds a pool of template whose size matches.
func (c *Controller) poolFor(ctx context.Context, template string, res api.Resources) *store.Pool {
	ps, err := c.opts.Store.ListPools(ctx)
	if err != nil {
		return nil
	}
	for _, p := range ps {
		if p.Template == template && sameResources(p.Resources, res) {
			return p
		}
	}
	return nil
}

// claim takes a ready sandbox of pool and gives it the caller's name and
// labels. nil, nil means the pool had none ready. The owner lock makes the
// claim atomic: two claims never get the same sandbox.
func (c *Controller) claim(ctx context.Context, pool *store.Pool, tpl *store.Template, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	if req.Name != "" {
		if err := validateName(req.Name); err != nil {
			return nil, err
		}
		held, err := c.opts.Store.SandboxesByName(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(held, func(s *store.Sandbox) bool { return s.KeyID == Caller(ctx) }) {
			return nil, errSandboxNameTaken(req.Name)
		}
	}
	if err := validateLabels(req.Labels); err != nil {
		return nil, err
	}
	for {
		id, ok, loaded := c.pools.TakeReady(pool.Name)
		if !ok && loaded {
			return nil, nil
		}
		if !ok {
			// The pool loop has not listed this pool yet: read the store once.
			ready, err := c.opts.Store.ListSandboxes(ctx, map[string]string{labelPool: pool.Name, labelPoolReady: "true", labelBuild: tpl.BuildID})
			if err != nil {
				return nil, err
			}
			ids := make([]string, len(ready))
			for i, sb := range ready {
				ids[i] = sb.ID
			}
			c.pools.OfferReady(pool.Name, ids...)
			continue
		}
		e := c.entry(id)
		if !e.mu.TryLock() {
			continue // the pool loop has it; its next pass queues it again if it stays ready
		}
		rec, err := c.opts.Store.GetSandbox(ctx, id)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			// Not an answer about the sandbox (the caller left, the store
			// failed): it stays queued rather than being dropped, and the
			// claim ends instead of emptying the queue one failed read at
			// a time.
			e.mu.Unlock()
			c.pools.OfferReady(pool.Name, id)
			return nil, err
		}
		if err != nil || rec.State != api.StateRunning || rec.Labels[labelPoolReady] != "true" ||
			rec.Labels[labelPool] != pool.Name || rec.Labels[labelBuild] != tpl.BuildID {
			e.mu.Unlock()
			continue // no longer ready, or stale: the pool loop replaces it
		}
		labels := maps.Clone(req.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[labelTemplate] = tpl.Name
		labels[labelBuild] = tpl.BuildID
		labels[labelPool] = pool.Name
		if req.Identifier != "" {
			labels[labelIdentifier] = req.Identifier
		}
		rec.Name, rec.Labels = req.Name, labels
		if pool.Cooldown == 0 {
			rec.KeepAlive, rec.SleepAfter = req.KeepAlive, c.cfg.SleepAfter
		}
		rec.LastActivityAt = time.Now().UTC()
		err = c.admitClaim(ctx, rec)
		e.mu.Unlock()
		if err != nil {
			// Refused: the sandbox stays in the pool for another caller.
			c.pools.OfferReady(pool.Name, id)
			if errors.Is(err, errdefs.ErrConflict) {
				return nil, errSandboxNameTaken(req.Name)
			}
			return nil, err
		}
		c.touch(rec.ID)
		c.pools.Served(pool.Name)
		c.stats.Pool(time.Now(), true)
		c.pools.KickAfterClaim()
		c.log.Info("served from pool", "pool", pool.Name, "sandbox", rec.ID, "name", rec.Name)
		return c.toAPI(rec), nil
	}
}

// createFromTemplate creates a sandbox on the template's layers with its
// env, then starts its start command and waits for its readiness check.
// A sandbox that fails its check is destroyed.
func (c *Controller) createFromTemplate(ctx context.Context, req api.CreateSandboxRequest, tpl *store.Template, extra map[string]string) (*api.Sandbox, error) {
	env := maps.Clone(tpl.Spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, req.Env)
	req.Env = env
	req.Image = tpl.ImageDigest
	req.Template = ""
	if req.Runtime == "" {
		req.Runtime = tpl.Spec.Runtime
	}
	labels := map[string]string{labelTemplate: tpl.Name, labelBuild: tpl.BuildID}
	if tpl.Spec.User != "" {
		labels[labelDefaultUser] = tpl.Spec.User
	}
	if tpl.Spec.Cwd != "" {
		labels[labelDefaultCwd] = tpl.Spec.Cwd
	}
	maps.Copy(labels, extra)
	_, pooled := extra[labelPoolReady]
	sb, err := c.create(ctx, req, &templatePlan{layers: tpl.Layers, labels: labels, keep: pooled})
	if err != nil {
		return nil, err
	}
	if len(tpl.Spec.Start) == 0 {
		return sb, nil
	}
	// A sandbox of the cluster's pool runs its start command from boot
	// (clusterpools.go); it is waited for all the same.
	_, fromCluster := extra[labelClusterPool]
	if err := c.startAndWait(ctx, sb.ID, tpl, !fromCluster); err != nil {
		if derr := c.destroy(context.WithoutCancel(ctx), sb.ID, "readiness check failed"); derr != nil {
			c.log.Warn("destroy unready sandbox", "sandbox", sb.ID, "err", derr)
		}
		return nil, err
	}
	return c.Get(ctx, sb.ID)
}

// startAndWait starts tpl's start command in sandbox id (unless it runs
// already: start false) and waits for its readiness check.
func (c *Controller) startAndWait(ctx context.Context, id string, tpl *store.Template, start bool) error {
	if start {
		if _, err := c.procs.Start(ctx, id, api.StartProcessRequest{
			ID: startProcessID, Cmd: tpl.Spec.Start, Cwd: tpl.Spec.Cwd, User: startUser(tpl),
		}); err != nil {
			return fmt.Errorf("template %s: start command: %w", tpl.Name, err)
		}
	}
	r := tpl.Spec.Ready
	if r == nil {
		return nil
	}
	if r.Cmd != "" {
		return c.waitReadyCmd(ctx, id, tpl)
	}
	w := api.WaitProcessRequest{Timeout: r.Timeout}
	if w.Timeout == "" {
		w.Timeout = defaultReadyTimeout.String()
	}
	if r.Port != 0 {
		w.For, w.Port = api.WaitPort, r.Port
	} else {
		w.For, w.Pattern = api.WaitLog, r.Log
	}
	if _, err := c.procs.Wait(ctx, id, startProcessID, w); err != nil {
		return fmt.Errorf("template %s: readiness check did not pass: %v: %w", tpl.Name, err, errdefs.ErrUnavailable)
	}
	return nil
}

// waitReadyCmd runs tpl's readiness command in sandbox id, as the start
// command's user and in its directory, until it exits 0, every
// api.ReadyCmdInterval within the readiness timeout.
func (c *Controller) waitReadyCmd(ctx context.Context, id string, tpl *store.Template) error {
	r := tpl.Spec.Ready
	timeout, err := readyTimeout(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := api.ExecRequest{Cmd: []string{"/bin/sh", "-c", r.Cmd}, Cwd: tpl.Spec.Cwd, User: startUser(tpl)}
	last := "it never ran"
	for {
		left := time.Until(deadlineOf(ctx)).Truncate(time.Millisecond)
		if left <= 0 {
			left = time.Millisecond // the wait below ends it
		}
		req.Timeout = left.String()
		var end *api.ExecEvent
		err := c.Exec(ctx, id, req, func(ev api.ExecEvent) error {
			if ev.Type == "end" {
				e := ev
				end = &e
			}
			return nil
		})
		switch {
		case err != nil:
			last = err.Error()
		case end != nil && end.Error == nil && end.ExitCode != nil && *end.ExitCode == 0:
			return nil
		case end != nil && end.Error != nil:
			last = end.Error.Message
		case end != nil && end.ExitCode != nil:
			last = fmt.Sprintf("it exited with code %d", *end.ExitCode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("template %s: readiness command %q did not succeed within %s (%s): %w",
				tpl.Name, rules.Truncate(r.Cmd, 60), timeout, last, errdefs.ErrUnavailable)
		case <-time.After(api.ReadyCmdInterval):
		}
	}
}

// deadlineOf is ctx's deadline (it has one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// startUser is who a template's start command runs as: the user its
// build steps ended with, "user" without such a step.
func startUser(tpl *store.Template) string {
	user := "user"
	for _, s := range tpl.Spec.Steps {
		if s.Kind == api.StepUser {
			user = s.User
		}
	}
	return user
}

// readyTimeout is how long r's check may take.
func readyTimeout(r *api.Readiness) (time.Duration, error) {
	if r.Timeout == "" {
		return defaultReadyTimeout, nil
	}
	d, err := time.ParseDuration(r.Timeout)
	if err != nil || d <= 0 {
		return 0, errdefs.Invalid("readiness timeout %q is not a positive duration", r.Timeout)
	}
	return d, nil
}

// poolCaller is the caller pooled sandboxes are recorded under until they
// are claimed, so unclaimed ones count against no real caller's quota.
const poolCaller = "paddock-pool"

// admitClaim applies the admission policy to a claim as to a create: the
// claimant becomes the sandbox's owner, its per-sandbox rules apply, and
// its quota is counted under the same lock creates count under, so claims
// and creates together cannot over-admit.
func (c *Controller) admitClaim(ctx context.Context, rec *store.Sandbox) error {
	rec.KeyID = Caller(ctx)
	c.adm.mu.RLock()
	cp := c.adm.policy
	c.adm.mu.RUnlock()
	if err := cp.Check(rec, rec.Labels[labelTemplate]); err != nil {
		return err
	}
	c.adm.quotaMu.Lock()
	defer c.adm.quotaMu.Unlock()
	// The disk is not checked again: the pooled sandbox's disk was
	// granted when the pool made it, at the same size (a claim never
	// changes it), so a claim adds nothing to what the host has granted.
	// Without a per-caller limit there is nothing to count either, and a
	// claim in a burst does not read every sandbox under the quota lock.
	if cp.HasQuota(rec.KeyID) {
		all, err := c.opts.Store.ListSandboxes(ctx, nil)
		if err != nil {
			return err
		}
		if err := cp.CheckQuota(rec.KeyID, rec.ID, all); err != nil {
			return err
		}
	}
	if err := c.opts.Store.ClaimSandbox(context.WithoutCancel(ctx), rec); err != nil {
		return err
	}
	c.changed(rec, "", "", "claimed from a pool")
	return nil
}
