// Package warmpools keeps warm pools: their records (set, get, list,
// delete), what each shows (ready, starting, served, its target and its
// last error), and the loop that keeps each at its target: refills,
// stale sandboxes replaced, a pool shrunk after a burst, served sandboxes
// ended after their cooldown, pools that a backend keeps itself driven.
// The sandboxes are the core's (internal/controller): it makes them from
// the pool's template, and a create claims one in the middle of its own
// work; the bookkeeping in memory both use is internal/controller/pools.
package warmpools

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/pools"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// PoolState is the bookkeeping the core's claims share.
	PoolState() *pools.State
	// Now is the controller's clock, by which the core's claims count a
	// pool's demand.
	Now() time.Time
	// CheckPoolResources refuses resources a pool's sandboxes could not get.
	CheckPoolResources(r api.Resources) error
	// StartPooled creates a sandbox of p from tpl, not claimable until
	// MarkPoolReady.
	StartPooled(ctx context.Context, p *store.Pool, tpl *store.Template) (id string, err error)
	MarkPoolReady(ctx context.Context, id string) error
	// Unpool takes a ready sandbox out of its pool unless a claim holds it.
	Unpool(ctx context.Context, id string) bool
	// DestroyPooled destroys a pool's sandbox for reason.
	DestroyPooled(ctx context.Context, id, reason string) error
	// LastActive is when a sandbox was last used.
	LastActive(id string) time.Time
	// The pools a backend keeps itself (runtime.WarmPooler).
	ClusterPool(p *store.Pool, tpl *store.Template) (runtime.WarmPooler, bool)
	TendClusterPool(ctx context.Context, wp runtime.WarmPooler, p *store.Pool, tpl *store.Template)
	ClusterPoolReady(ctx context.Context, wp runtime.WarmPooler, p *store.Pool) int
	RemoveClusterPools(ctx context.Context, keep map[string]runtime.WarmPooler)
	RemoveClusterPool(ctx context.Context, name string)
}

var _ Core = (*controller.Controller)(nil)

// Store keeps the pools' records and reads the templates and sandboxes.
type Store interface {
	GetPool(ctx context.Context, name string) (*store.Pool, error)
	PutPool(ctx context.Context, p *store.Pool) error
	ListPools(ctx context.Context) ([]*store.Pool, error)
	DeletePool(ctx context.Context, name string) error
	GetTemplate(ctx context.Context, name string) (*store.Template, error)
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	ListSandboxes(ctx context.Context, labels map[string]string) ([]*store.Sandbox, error)
}

// Options configures a Service.
type Options struct {
	Core   Core
	Store  Store
	Logger *slog.Logger
}

// Service keeps the warm pools.
type Service struct {
	core  Core
	st    Store
	state *pools.State
	log   *slog.Logger
}

// New returns the pools subsystem over o.Core.
func New(o Options) *Service {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: o.Core, st: o.Store, state: o.Core.PoolState(), log: log}
}

// Set creates or changes a warm pool.
func (s *Service) Set(ctx context.Context, name string, req api.SetPoolRequest) (*api.Pool, error) {
	if err := controller.RequireScopeAll(ctx, "setting a pool"); err != nil {
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
	if _, err := s.st.GetTemplate(ctx, req.Template); err != nil {
		return nil, err
	}
	if err := s.core.CheckPoolResources(req.Resources); err != nil {
		return nil, err
	}
	rec := &store.Pool{Name: name, Template: req.Template, MinReady: req.MinReady, MaxReady: req.MaxReady, Cooldown: cooldown, Resources: req.Resources}
	if old, err := s.st.GetPool(ctx, name); err == nil {
		rec.CreatedAt = old.CreatedAt
	}
	if err := s.st.PutPool(ctx, rec); err != nil {
		return nil, err
	}
	s.state.RefillSucceeded(name) // a changed pool tries at once
	s.log.Info("pool set", "pool", name, "template", req.Template, "min_ready", req.MinReady, "max_ready", req.MaxReady, "cooldown", cooldown)
	s.state.Kick()
	return s.poolAPI(ctx, rec)
}

// Get returns a pool and its state.
func (s *Service) Get(ctx context.Context, name string) (*api.Pool, error) {
	if !rules.ValidName(name) {
		return nil, errdefs.Invalid("pool name %q is not valid", rules.Truncate(name, 80))
	}
	p, err := s.st.GetPool(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.poolAPI(ctx, p)
}

// List lists pools and their state.
func (s *Service) List(ctx context.Context) ([]api.Pool, error) {
	ps, err := s.st.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Pool{}
	for _, p := range ps {
		a, err := s.poolAPI(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	return out, nil
}

// Delete removes a pool and destroys its unclaimed sandboxes; sandboxes
// already served keep running.
func (s *Service) Delete(ctx context.Context, name string) error {
	if err := controller.RequireScopeAll(ctx, "deleting a pool"); err != nil {
		return err
	}
	if !rules.ValidName(name) {
		return errdefs.Invalid("pool name %q is not valid", rules.Truncate(name, 80))
	}
	if err := s.st.DeletePool(ctx, name); err != nil {
		return err
	}
	// Refills in flight finish first, so that what they made goes too
	// and the pool leaves nothing behind when this returns.
	s.waitRefills(ctx, name, refillWait)
	members, err := s.st.ListSandboxes(ctx, map[string]string{controller.LabelPool: name})
	if err != nil {
		return err
	}
	for _, sb := range members {
		if _, unclaimed := sb.Labels[controller.LabelPoolReady]; !unclaimed {
			continue // served: it is the caller's now
		}
		if err := s.core.DestroyPooled(ctx, sb.ID, "pool deleted"); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("destroy pooled sandbox", "sandbox", sb.ID, "err", err)
		}
	}
	s.core.RemoveClusterPool(ctx, name)
	s.state.Forget(name)
	s.log.Info("pool deleted", "pool", name)
	return nil
}

// refillWait bounds how long deleting a pool waits for its refills in
// flight (a template's readiness check can take a while); a refill that
// ends later leaves a sandbox the pool loop removes on its next pass.
const refillWait = time.Minute

// waitRefills waits until pool has no refill in flight, at most limit.
func (s *Service) waitRefills(ctx context.Context, pool string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		n := s.state.Starting(pool)
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

func (s *Service) poolAPI(ctx context.Context, p *store.Pool) (*api.Pool, error) {
	ready, err := s.st.ListSandboxes(ctx, map[string]string{controller.LabelPool: p.Name, controller.LabelPoolReady: "true"})
	if err != nil {
		return nil, err
	}
	out := &api.Pool{
		Name: p.Name, Template: p.Template, MinReady: p.MinReady, MaxReady: p.MaxReady, Resources: p.Resources,
		CreatedAt: p.CreatedAt,
	}
	out.Target = pools.Target(p.MinReady, p.MaxReady, s.state.Peak(p.Name, s.core.Now()))
	for _, sb := range ready {
		if sb.State == api.StateRunning {
			out.Ready++
		}
	}
	if tpl, err := s.st.GetTemplate(ctx, p.Template); err == nil {
		if wp, ok := s.core.ClusterPool(p, tpl); ok {
			out.Ready = s.core.ClusterPoolReady(ctx, wp, p)
		}
	}
	if p.Cooldown > 0 {
		out.Cooldown = p.Cooldown.String()
	}
	st := s.state.Stats(p.Name)
	out.Starting, out.Served, out.Cold, out.Error = st.Starting, st.Served, st.Cold, st.Error
	return out, nil
}
