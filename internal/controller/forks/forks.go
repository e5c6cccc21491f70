// Package forks makes the copies of a fork: from the moment the core
// snapshots (the source's files, or its memory too) it creates the copies,
// a few at once, each as a create of the caller's from the snapshot, and
// removes the ones made when any fails, so a fork makes all its copies or
// none. The snapshot under the source's lock, and each create, are the
// core's (internal/controller, fork.go).
package forks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
)

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// StartFork validates a fork and snapshots its source.
	StartFork(ctx context.Context, ref string, req api.ForkRequest) (*controller.ForkPoint, error)
	// CreateForkCopy creates one copy from req.
	CreateForkCopy(ctx context.Context, fp *controller.ForkPoint, req api.CreateSandboxRequest) (*api.Sandbox, error)
	// Delete removes a copy of a fork that failed.
	Delete(ctx context.Context, ref string) error
	// RecordFork writes a fork that made all its copies to its source's
	// ledger.
	RecordFork(ctx context.Context, fp *controller.ForkPoint)
}

var _ Core = (*controller.Controller)(nil)

// parallel bounds how many copies start at once.
const parallel = 4

// Service makes forks.
type Service struct {
	core Core
	log  *slog.Logger
}

// New returns the fork subsystem over core.
func New(core Core, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: core, log: log}
}

// CopyFunc adjusts the create request of copy i (from 0) of a fork of src,
// the source as it was when the fork's snapshot was taken. The request's
// Labels are the copy's own map. FromSnapshot must be left as it is;
// everything else a create takes may be changed. src is the same for every
// copy, whose calls may run at once: it is read, never changed.
type CopyFunc func(src *api.Sandbox, i int, req *api.CreateSandboxRequest)

// Fork snapshots a sandbox now and restores it into req.Count new,
// independent sandboxes with the source's runtime, size, environment and
// idle policy. If any copy fails, the copies made are destroyed.
func (s *Service) Fork(ctx context.Context, ref string, req api.ForkRequest) (*api.ForkResult, error) {
	return s.ForkEach(ctx, ref, req, nil)
}

// ForkEach is Fork with a say in each copy (each, when not nil): a front
// end whose sandboxes carry per-sandbox secrets in their labels (E2B's
// access tokens), or whose forks keep settings Fork does not copy (the
// network, a lifetime), sets them per copy before the copy is created, so
// no copy ever runs with the source's.
func (s *Service) ForkEach(ctx context.Context, ref string, req api.ForkRequest, each CopyFunc) (*api.ForkResult, error) {
	fp, err := s.core.StartFork(ctx, ref, req)
	if err != nil {
		return nil, err
	}
	n := fp.Count
	res := &api.ForkResult{Snapshot: *fp.Snapshot, Sandboxes: make([]api.Sandbox, n)}
	errs := make([]error, n)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := fp.Copy
			if req.NamePrefix != "" {
				r.Name = fmt.Sprintf("%s-%d", req.NamePrefix, i+1)
			}
			if each != nil {
				r.Labels = maps.Clone(r.Labels)
				each(fp.Source, i, &r)
			}
			sb, err := s.core.CreateForkCopy(ctx, fp, r)
			if err != nil {
				errs[i] = fmt.Errorf("fork copy %d: %w", i+1, err)
				return
			}
			res.Sandboxes[i] = *sb
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, sb := range res.Sandboxes {
			if sb.ID == "" {
				continue
			}
			if derr := s.core.Delete(context.WithoutCancel(ctx), sb.ID); derr != nil {
				s.log.Warn("remove copy of a failed fork", "sandbox", sb.ID, "err", derr)
			}
		}
		return nil, err
	}
	s.core.RecordFork(ctx, fp)
	return res, nil
}
