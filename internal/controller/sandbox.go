package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// teardownTimeout bounds rollback and teardown, which run even when the
// request that caused them is gone.
const teardownTimeout = 60 * time.Second

// Create admits, records and starts a sandbox, returning once its agent
// answers. A failure leaves the record in state error with the reason and
// no compute behind it.
func (c *Controller) Create(ctx context.Context, req api.CreateSandboxRequest) (sb *api.Sandbox, err error) {
	start := time.Now()
	defer func() { c.stats.Created(time.Now(), time.Since(start), err) }() // stats.go
	if req.Template != "" || req.Pool != "" || req.Identifier != "" || hasReservedLabel(req.Labels) {
		return c.createTemplated(ctx, req) // templatecreate.go
	}
	return c.create(ctx, req, nil)
}

// create is Create with what a template adds (nil: nothing).
func (c *Controller) create(ctx context.Context, req api.CreateSandboxRequest, tp *templatePlan) (*api.Sandbox, error) {
	if err := validateName(req.Name); err != nil {
		return nil, err
	}
	if err := rules.Env(req.Env); err != nil {
		return nil, err
	}
	if err := validateLabels(req.Labels); err != nil {
		return nil, err
	}
	// A claim from a pool the cluster keeps starts nothing on this host
	// (clusterpools.go): like a claim from Paddock's own pool, it takes
	// none of the caller's create slots.
	if tp == nil || tp.labels[labelClusterPool] == "" {
		caller, limit := Caller(ctx), c.cfg.EffectiveCreatesPerCaller()
		if n := c.slots.inFlight(caller); n >= limit {
			c.log.Debug("create waits for the caller's earlier creates", "caller", caller, "starting", n)
		}
		done, err := c.slots.acquire(ctx, caller, limit) // createslots.go
		if err != nil {
			return nil, err
		}
		defer done()
	}
	plan, err := c.planCreate(ctx, &req) // snapshot restore and idle policy (snapshots.go)
	if err != nil {
		return nil, err
	}
	release, err := c.leaseLayers(ctx, plan, tp) // until the record names them (lease.go)
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := c.sizeResources(req.Size, req.Resources) // presets (sizes.go)
	if err != nil {
		return nil, err
	}
	sleepAfter, err := rules.ParseDuration("sleep_after", req.SleepAfter, time.Second)
	if err != nil {
		return nil, err
	}
	if sleepAfter == 0 {
		sleepAfter = c.cfg.SleepAfter
	}
	lifetime, err := rules.ParseDuration("timeout", req.Timeout, time.Second)
	if err != nil {
		return nil, err
	}
	rtName := req.Runtime
	if rtName == "" {
		rtName = c.cfg.DefaultRuntime
	}
	if rtName != api.RuntimeRunc && rtName != api.RuntimeGVisor && rtName != api.RuntimeCrun {
		return nil, errdefs.Invalid("runtime %q: want %s, %s or %s", rules.Truncate(rtName, 40), api.RuntimeRunc, api.RuntimeGVisor, api.RuntimeCrun)
	}
	if _, err := c.backend(rtName); err != nil {
		return nil, err
	}
	if err := c.checkOnIdle(req.OnIdle, &store.Sandbox{ID: "(new)", Runtime: rtName}); err != nil { // snapshots.go
		return nil, err
	}
	netPolicy, err := c.admitNetwork(ctx, &req, rtName) // network.go
	if err != nil {
		return nil, err
	}
	imgRef := req.Image
	if imgRef == "" {
		imgRef = c.cfg.DefaultImage
	}
	imageUse.RLock() // until recorded, so the image cannot be collected (images.go)
	defer imageUse.RUnlock()
	img, err := c.image(ctx, imgRef)
	if err != nil {
		return nil, err
	}

	now := time.Now().UTC()
	rec := &store.Sandbox{
		ID:             newID(),
		Name:           req.Name,
		State:          api.StateCreating,
		Image:          imgRef,
		ImageDigest:    img.Digest,
		Runtime:        rtName,
		Resources:      res,
		Env:            maps.Clone(req.Env),
		Labels:         maps.Clone(req.Labels),
		SleepAfter:     sleepAfter,
		KeepAlive:      req.KeepAlive,
		Timeout:        lifetime,
		CreatedAt:      now,
		UpdatedAt:      now,
		LastActivityAt: now,
	}
	plan.apply(rec)
	tp.apply(rec)
	if req.Name != "" && idRE.MatchString(req.Name) {
		// A name that is some sandbox's id would make addressing ambiguous.
		if other, err := c.opts.Store.GetSandbox(ctx, req.Name); err == nil && other.State != api.StateDestroyed && visible(ctx, other.KeyID) {
			return nil, errSandboxNameTaken(req.Name)
		}
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := c.admitAndRecord(ctx, rec); err != nil { // policy and quotas (admission.go)
		c.forget(rec.ID)
		if errors.Is(err, errdefs.ErrConflict) && req.Name != "" {
			return nil, errSandboxNameTaken(req.Name)
		}
		return nil, err
	}
	if rec.Timeout > 0 {
		c.wakeLifetimes() // lifetime.go
	}
	log := c.log.With("sandbox", rec.ID, "op", "create")
	log.Info("creating sandbox", "name", rec.Name, "image", imgRef, "runtime", rtName)
	// Starting is not abandoned half-way when the caller goes away: it
	// runs to a final state under its own deadline.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.startBudget(rtName))
	defer cancel()
	if netPolicy != nil {
		if _, err := c.prepareNetwork(sctx, rec.ID, netPolicy); err != nil {
			c.failStart(sctx, rec, err)
			return nil, err
		}
		if err := c.recheckInjectionSecrets(sctx, rec.KeyID, netPolicy); err != nil {
			// The recorded rules go too, so no later start uses them.
			c.releaseNetwork(sctx, rec.ID)
			c.failStart(sctx, rec, err)
			return nil, err
		}
	}
	restore, err := c.memoryRestore(sctx, rec, plan.snap) // memsnapshot.go
	if err == nil {
		err = c.launchCompute(sctx, e, rec, img, restore)
	}
	if err != nil {
		c.failStart(sctx, rec, err)
		return nil, err
	}
	if err := c.setState(sctx, rec, api.StateRunning, "created", false); err != nil {
		return nil, err
	}
	c.renewSnapshot(sctx, rec.SnapshotID) // restored: its snapshot lives a TTL from now (snapshotttl.go)
	return c.toAPI(rec), nil
}

// image resolves a reference for ctx's caller, building a built-in image
// on first use. A name imported or pulled by several callers finds the
// caller's own import, else the operator's (image.ForCaller), never
// another tenant's.
func (c *Controller) image(ctx context.Context, ref string) (*image.Image, error) {
	img, err := c.opts.Images.Resolve(image.ForCaller(ctx, Caller(ctx), func(owner string) bool {
		return c.sharedImporter(ctx, owner)
	}), ref)
	if err == nil {
		return img, nil
	}
	if !errors.Is(err, errdefs.ErrNotFound) || !slices.Contains(image.Builtin(), ref) {
		return nil, err
	}
	c.log.Info("building image on first use", "image", ref)
	return c.opts.Images.Ensure(ctx, ref, func(line string) {
		c.log.Debug("image build", "image", ref, "line", line)
	})
}

// startCompute starts the container and waits until its agent answers.
// The caller holds e.mu.
func (c *Controller) startCompute(ctx context.Context, e *entry, rec *store.Sandbox, img *image.Image) error {
	return c.launchCompute(ctx, e, rec, img, nil)
}

// launchCompute is startCompute, with restore (hibernate.go) making the
// container from a memory image instead of booting it.
func (c *Controller) launchCompute(ctx context.Context, e *entry, rec *store.Sandbox, img *image.Image, restore func(context.Context, runtime.Spec) (runtime.Info, error)) error {
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return err
	}
	env := withDefaults(imageEnv(img, rec.Env), rec.Labels[labelDefaultUser], rec.Labels[labelDefaultCwd]) // images.go
	layers, err := c.layersFor(rec, img)
	if err != nil {
		return err
	}
	snapLayers, err := c.snapshotLayerPaths(rec) // snapshots.go
	if err != nil {
		return err
	}
	imgRef, imgLayers, err := c.podImage(ctx, b, rec, img) // templateimage.go
	if err != nil {
		return startErr(rec.ID, err)
	}
	netSetup, err := c.prepareNetwork(ctx, rec.ID, nil) // network.go
	if err != nil {
		return err
	}
	trust, err := composeTrustBundle(layers, netSetup) // trust.go
	if err != nil {
		return fmt.Errorf("sandbox %s trust bundle: %w", rec.ID, err)
	}
	launch := b.Start
	if restore != nil {
		launch = restore
	}
	info, err := launch(ctx, runtime.Spec{
		ID:             rec.ID,
		Layers:         layers,
		Image:          imgRef,
		ImageLayers:    imgLayers,
		SnapshotLayers: snapLayers,
		AgentBinary:    c.opts.AgentBinary,
		Env:            append(env, netSetup.Env...),
		SecretEnv:      netSetup.SecretEnv,
		Egress:         netSetup.Egress,
		NetNSPath:      netSetup.NetNSPath,
		ResolvConf:     netSetup.ResolvConf,
		TrustBundle:    trust,
		Resources:      runtimeResources(rec.Resources), // clusterpools.go
		WarmPool:       rec.Labels[labelClusterPool],
	})
	if err != nil {
		return startErr(rec.ID, err)
	}
	ag := agentClient(info)
	rctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	if err := ag.WaitReady(rctx); err != nil {
		ag.Close()
		return fmt.Errorf("sandbox %s: agent did not answer within %s: %v: %w", rec.ID, c.cfg.ReadyTimeout, err, errdefs.ErrUnavailable)
	}
	if e.agent != nil {
		e.agent.Close()
	}
	e.agent = ag
	c.armWatch(e, rec.ID, rec.Runtime) // death.go
	return nil
}

// startBudget bounds a start on runtime rt: the agent's ReadyTimeout and
// a rollback, and the backend's own wait where it has one
// (runtime.StartBounder: a cluster's scheduling and image pulls).
func (c *Controller) startBudget(rt string) time.Duration {
	d := c.cfg.ReadyTimeout + teardownTimeout
	if b, err := c.backend(rt); err == nil {
		if sb, ok := b.(runtime.StartBounder); ok {
			d += sb.StartTimeout()
		}
	}
	return d
}

// failStart rolls back a failed start: no compute is left, and the record
// says why in state error.
func (c *Controller) failStart(ctx context.Context, rec *store.Sandbox, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if b, err := c.backend(rec.Runtime); err == nil {
		if derr := b.Stop(ctx, rec.ID); derr != nil {
			c.log.Warn("rollback of failed start", "sandbox", rec.ID, "err", derr)
		}
	}
	if err := c.setState(ctx, rec, api.StateError, cause.Error(), true); err != nil {
		c.log.Warn("record failed start", "sandbox", rec.ID, "err", err)
	}
}

// Get returns one sandbox by id or name.
func (c *Controller) Get(ctx context.Context, ref string) (*api.Sandbox, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return c.toAPI(rec), nil
}

// List returns the live sandboxes carrying every given label that ctx's
// caller may see.
func (c *Controller) List(ctx context.Context, labels map[string]string) ([]api.Sandbox, error) {
	recs, err := c.opts.Store.ListSandboxes(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := make([]api.Sandbox, 0, len(recs))
	for _, r := range recs {
		if visible(ctx, r.KeyID) {
			out = append(out, *c.toAPI(r))
		}
	}
	return out, nil
}

// History returns a sandbox's recorded state changes.
func (c *Controller) History(ctx context.Context, ref string) ([]store.StateChange, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return c.opts.Store.StateHistory(ctx, rec.ID)
}

// Stop stops a sandbox's compute and keeps its filesystem.
func (c *Controller) Stop(ctx context.Context, ref string) (*api.Sandbox, error) {
	return c.stop(ctx, ref, "stop requested")
}

func (c *Controller) stop(ctx context.Context, ref, reason string) (*api.Sandbox, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if rec, err = c.resolve(ctx, rec.ID); err != nil { // re-read under the owner lock
		return nil, err
	}
	if rec.State == api.StateStopped {
		return c.toAPI(rec), nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if err := c.setState(ctx, rec, api.StateStopping, reason, false); err != nil {
		return nil, err
	}
	rec.LastActivityAt = time.Unix(0, e.activity.Load()).UTC()
	b, err := c.backend(rec.Runtime)
	if err == nil {
		err = b.Stop(ctx, rec.ID)
	}
	if e.agent != nil {
		e.agent.Close()
		e.agent = nil
	}
	if err != nil {
		_ = c.setState(ctx, rec, api.StateError, "stop failed: "+err.Error(), false)
		return nil, err
	}
	if err := c.setState(ctx, rec, api.StateStopped, reason, false); err != nil {
		return nil, err
	}
	c.dropMemory(rec.ID) // a hibernated sandbox's memory goes; its files stay
	return c.toAPI(rec), nil
}

// StartSandbox starts a stopped sandbox again, with the files it had.
func (c *Controller) StartSandbox(ctx context.Context, ref string) (*api.Sandbox, error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, err = c.startLocked(ctx, e, rec.ID, "start requested")
	if err != nil {
		return nil, err
	}
	return c.toAPI(rec), nil
}

// startLocked brings a sandbox to running; the caller holds e.mu.
func (c *Controller) startLocked(ctx context.Context, e *entry, id, reason string) (*store.Sandbox, error) {
	rec, err := c.resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	switch rec.State {
	case api.StateRunning:
		if e.agent == nil {
			if err := c.adopt(ctx, e, rec); err != nil {
				return nil, err
			}
		}
		return rec, nil
	case api.StateHibernated:
		if err := c.wakeLocked(ctx, e, rec, reason); err != nil { // hibernate.go
			return nil, err
		}
		return rec, nil
	case api.StateStopped, api.StateError:
	default:
		return nil, &InvalidTransitionError{ID: rec.ID, From: rec.State, To: api.StateRunning}
	}
	// A memory image left by a failed restore is of no use to a boot.
	c.dropMemory(rec.ID)
	img, err := c.opts.Images.Resolve(ctx, rec.ImageDigest)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: its image %s is gone: %w", rec.ID, rec.ImageDigest, err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.startBudget(rec.Runtime))
	defer cancel()
	why, restoring := c.restoring(sctx, rec, reason) // fork.go
	if err := c.setState(sctx, rec, api.StateCreating, why, false); err != nil {
		return nil, err
	}
	e.activity.Store(time.Now().UnixNano())
	if err := c.startCompute(sctx, e, rec, img); err != nil {
		c.failStart(sctx, rec, err)
		return nil, err
	}
	if err := c.setState(sctx, rec, api.StateRunning, reason, false); err != nil {
		return nil, err
	}
	if restoring {
		c.recordIdleRestore(sctx, rec) // restoreledger.go
		c.renewSnapshot(sctx, rec.SnapshotID)
	}
	return rec, nil
}

// agentClient reaches the agent the backend says: on its socket on this
// host, or over the network with the sandbox's token.
func agentClient(info runtime.Info) *client.Client {
	if info.AgentAddr != "" {
		return client.NewTCP(info.AgentAddr, info.AgentToken)
	}
	return client.New(info.AgentSocket)
}

// adopt connects to the agent of a sandbox that runs already (after a
// daemon restart).
func (c *Controller) adopt(ctx context.Context, e *entry, rec *store.Sandbox) error {
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return err
	}
	info, err := b.Info(ctx, rec.ID)
	if err != nil {
		return err
	}
	ag := agentClient(info)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := ag.WaitReady(rctx); err != nil {
		ag.Close()
		return fmt.Errorf("sandbox %s: agent does not answer: %v: %w", rec.ID, err, errdefs.ErrUnavailable)
	}
	e.agent = ag
	c.armWatch(e, rec.ID, rec.Runtime) // death.go
	return nil
}

// Delete destroys a sandbox from any state. Deleting a missing or already
// destroyed sandbox is ErrNotFound.
func (c *Controller) Delete(ctx context.Context, ref string) error {
	return c.destroy(ctx, ref, "delete requested")
}

func (c *Controller) destroy(ctx context.Context, ref, reason string) error {
	// A destroy that has been asked for is carried out even when the
	// caller goes away meanwhile (a client killed while it waits for the
	// sandbox's lock, an MCP process ending): otherwise the sandbox would
	// outlive the one request meant to end it.
	ctx = context.WithoutCancel(ctx)
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if rec, err = c.resolve(ctx, rec.ID); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	if err := c.setState(ctx, rec, api.StateDestroying, reason, true); err != nil {
		return err
	}
	if e.agent != nil {
		e.agent.Close()
		e.agent = nil
	}
	// A backend that can kill first has the files removed after the
	// record says destroyed (reclaim.go): the caller waits for the
	// compute to be gone, not for the unmounts and unlinks.
	var later runtime.Backend
	if b, berr := c.backend(rec.Runtime); berr == nil {
		var err error
		if k, ok := b.(runtime.Killer); ok {
			err, later = k.Kill(ctx, rec.ID), b
		} else {
			err = b.Destroy(ctx, rec.ID)
		}
		if err != nil {
			_ = c.setState(ctx, rec, api.StateError, "destroy failed: "+err.Error(), false)
			return err
		}
	}
	c.releaseNetwork(ctx, rec.ID) // network.go
	c.dropMemory(rec.ID)          // hibernate.go
	if err := c.setState(ctx, rec, api.StateDestroyed, reason, false); err != nil {
		if later != nil {
			c.reclaimLater(later, rec.ID)
		}
		return err
	}
	c.forget(rec.ID)
	if later != nil {
		c.reclaimLater(later, rec.ID)
	}
	return nil
}

// Agent returns a running sandbox's agent client, starting a stopped
// sandbox first (transparently: see docs/architecture.md), and counts
// the call as activity. done must be called when the caller is finished.
func (c *Controller) Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error) {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, "", nil, err
	}
	e := c.entry(rec.ID)
	e.mu.Lock()
	if rec, err = c.resolve(ctx, rec.ID); err == nil {
		switch {
		case deathError(rec.ID, rec.State, rec.ErrorReason) != nil:
			// A sandbox that died says why, rather than being started
			// again behind the caller's back; a start brings it back.
			err = deathError(rec.ID, rec.State, rec.ErrorReason)
		case rec.State == api.StatePaused, rec.State == api.StateHibernated:
			// The next request to a paused or hibernated sandbox resumes
			// it, as the next request to a stopped one starts it.
			err = c.resumeLocked(ctx, e, rec, "request to a "+rec.State+" sandbox")
			if err == nil && e.agent == nil {
				err = c.adopt(ctx, e, rec)
			}
		case rec.State != api.StateRunning || e.agent == nil:
			rec, err = c.startLocked(ctx, e, rec.ID, "request to a "+rec.State+" sandbox")
		}
	}
	ag = e.agent
	if err == nil && ag == nil {
		err = fmt.Errorf("sandbox %s has no agent connection: %w", rec.ID, errdefs.ErrUnavailable)
	}
	if err == nil {
		e.active.Add(1)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, "", nil, err
	}
	e.activity.Store(time.Now().UnixNano())
	var once bool
	return ag, rec.ID, func() {
		if !once {
			once = true
			e.activity.Store(time.Now().UnixNano())
			e.active.Add(-1)
		}
	}, nil
}

// withAgent runs fn with a sandbox's agent (starting or resuming the
// sandbox first, as Agent does) and counts the call as activity.
func withAgent[T any](ctx context.Context, c *Controller, ref string, fn func(ag *client.Client) (T, error)) (T, error) {
	ag, _, done, err := c.Agent(ctx, ref)
	if err != nil {
		var zero T
		return zero, err
	}
	defer done()
	return fn(ag)
}

// startErr says a backend's start of sandbox id failed, naming the
// sandbox once: backends name it in their errors already, mostly.
func startErr(id string, err error) error {
	if strings.Contains(err.Error(), id) {
		return fmt.Errorf("start: %w", err)
	}
	return fmt.Errorf("start sandbox %s: %w", id, err)
}
