package warmpools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/pools"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// Run keeps every pool at its target (min_ready, or more after a burst:
// pools/demand.go), replaces stale pooled sandboxes and applies cooldowns
// until ctx ends, a pass every five seconds and whenever the bookkeeping
// is kicked (a pool set, a claim). Its first pass reconciles what a
// previous daemon left: pooled sandboxes that no longer match are removed.
func (s *Service) Run(ctx context.Context) {
	wake := s.state.Wake()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		s.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

func (s *Service) pass(ctx context.Context) {
	list, err := s.st.ListPools(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("pools", "err", err)
		}
		return
	}
	known := map[string]bool{}
	onCluster := map[string]runtime.WarmPooler{}
	for _, p := range list {
		known[p.Name] = true
		if wp := s.tend(ctx, p); wp != nil {
			onCluster[p.Name] = wp
		}
	}
	s.core.RemoveClusterPools(ctx, onCluster)
	// Unclaimed sandboxes of pools that no longer exist.
	all, err := s.st.ListSandboxes(ctx, map[string]string{controller.LabelPoolReady: "true"})
	if err != nil {
		return
	}
	for _, sb := range all {
		if !known[sb.Labels[controller.LabelPool]] {
			_ = s.core.DestroyPooled(ctx, sb.ID, "pool deleted")
		}
	}
}

// tend keeps p at its size; it returns the backend that keeps p's pool
// when one does.
func (s *Service) tend(ctx context.Context, p *store.Pool) runtime.WarmPooler {
	tpl, terr := s.st.GetTemplate(ctx, p.Template)
	if terr != nil && !errors.Is(terr, errdefs.ErrNotFound) {
		return nil
	}
	members, err := s.st.ListSandboxes(ctx, map[string]string{controller.LabelPool: p.Name})
	if err != nil {
		return nil
	}
	wp, onCluster := s.core.ClusterPool(p, tpl)
	ready := 0
	var readyIDs []string
	now := time.Now()
	for _, sb := range members {
		if sb.Labels[controller.LabelPoolReady] == "starting" {
			// Left by a daemon that stopped mid-refill.
			inFlight := s.state.Starting(p.Name) > 0
			if inFlight {
				continue
			}
			// The list may predate a refill that has since ended: the
			// record is read again (a refill relabels its sandbox
			// before it stops counting as one).
			cur, err := s.st.GetSandbox(ctx, sb.ID)
			if err != nil {
				continue
			}
			if cur.Labels[controller.LabelPoolReady] == "starting" {
				if cur.State != api.StateCreating {
					_ = s.core.DestroyPooled(ctx, sb.ID, "pooled sandbox never became ready")
				}
				continue
			}
			sb = cur // readied since the list
		}
		if sb.Labels[controller.LabelPoolReady] == "shrinking" {
			_ = s.core.DestroyPooled(ctx, sb.ID, "pool shrinks after a burst")
			continue
		}
		if sb.Labels[controller.LabelPoolReady] != "true" {
			// Served: the cooldown destroys it once idle that long.
			if p.Cooldown > 0 && sb.State == api.StateRunning {
				idle := now.Sub(s.core.LastActive(sb.ID))
				if idle >= p.Cooldown {
					s.log.Info("pool cooldown", "pool", p.Name, "sandbox", sb.ID, "idle", idle.Round(time.Second))
					_ = s.core.DestroyPooled(ctx, sb.ID, "pool cooldown")
				}
			}
			continue
		}
		stale := tpl == nil || sb.Labels[controller.LabelBuild] != tpl.BuildID || sb.State != api.StateRunning || onCluster
		if stale && sb.State != api.StateCreating {
			_ = s.core.DestroyPooled(ctx, sb.ID, "pooled sandbox is stale")
			continue
		}
		if !stale {
			ready++
			readyIDs = append(readyIDs, sb.ID)
		}
	}
	if tpl == nil {
		s.state.SetError(p.Name, fmt.Sprintf("template %q was deleted; the pool cannot refill", p.Template))
		return nil
	}
	if onCluster {
		s.core.TendClusterPool(ctx, wp, p, tpl)
		return wp
	}
	s.state.OfferReady(p.Name, readyIDs...)
	target := pools.Target(p.MinReady, p.MaxReady, s.state.Peak(p.Name, s.core.Now()))
	s.shrink(ctx, p, readyIDs, target)
	// None while its last refill's failure waits (pools/retry.go).
	need := s.state.Reserve(p.Name, target, ready, now)
	for i := 0; i < need; i++ {
		go s.refill(context.WithoutCancel(ctx), p, tpl)
	}
	return nil
}

// shrink destroys ready sandboxes above target, a few per pass (the newest
// first, which the list gives last), once a burst that grew the pool has
// passed out of its memory. A sandbox is first taken out of the pool under
// its lock, so a claim never gets one that is going.
func (s *Service) shrink(ctx context.Context, p *store.Pool, readyIDs []string, target int) {
	excess := min(len(readyIDs)-target, pools.MaxRefillsInFlight)
	for i := 0; i < excess; i++ {
		id := readyIDs[len(readyIDs)-1-i]
		if !s.core.Unpool(ctx, id) {
			continue
		}
		s.log.Info("pool shrinks", "pool", p.Name, "sandbox", id, "target", target)
		_ = s.core.DestroyPooled(ctx, id, "pool shrinks after a burst")
	}
}

func (s *Service) refill(ctx context.Context, p *store.Pool, tpl *store.Template) {
	defer s.state.RefillDone(p.Name)
	id, err := s.core.StartPooled(ctx, p, tpl)
	if err == nil {
		// Claimable only now that its readiness check has passed.
		err = s.core.MarkPoolReady(ctx, id)
	}
	if err != nil {
		wait := s.state.RefillFailed(p.Name, time.Now())
		time.AfterFunc(wait, s.state.Kick)
		s.log.Warn("pool refill", "pool", p.Name, "err", err, "retry_in", wait)
		s.state.SetError(p.Name, err.Error())
		return
	}
	s.state.RefillSucceeded(p.Name)
	s.state.OfferReady(p.Name, id)
	// A refill that started before its template was deleted may end after
	// the pool said so: it must not clear that (the next pass destroys
	// the sandbox it made, as stale).
	if _, err := s.st.GetTemplate(ctx, p.Template); errors.Is(err, errdefs.ErrNotFound) {
		return
	}
	s.state.SetError(p.Name, "")
}
