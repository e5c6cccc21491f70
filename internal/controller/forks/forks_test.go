package forks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// fakeCore stands in for the controller: StartFork gives a fixed moment,
// CreateForkCopy makes a record of each copy (failing the one named
// failName), and it counts how many copies run at once.
type fakeCore struct {
	failName string
	mu       sync.Mutex
	created  []api.CreateSandboxRequest
	deleted  []string
	recorded int
	running  atomic.Int32
	most     atomic.Int32
}

func (f *fakeCore) StartFork(_ context.Context, ref string, req api.ForkRequest) (*controller.ForkPoint, error) {
	if ref == "missing" {
		return nil, errdefs.NotFound("sandbox %q", ref)
	}
	n := max(req.Count, 1)
	return &controller.ForkPoint{
		Source:   &api.Sandbox{ID: "src", Labels: map[string]string{"team": "a"}},
		Snapshot: &api.Snapshot{ID: "snap"},
		Copy:     api.CreateSandboxRequest{FromSnapshot: "snap", Labels: map[string]string{"team": "a"}},
		Count:    n,
	}, nil
}

func (f *fakeCore) CreateForkCopy(_ context.Context, fp *controller.ForkPoint, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	now := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		most := f.most.Load()
		if now <= most || f.most.CompareAndSwap(most, now) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	if req.FromSnapshot != fp.Snapshot.ID {
		return nil, fmt.Errorf("copy not from the fork's snapshot: %q", req.FromSnapshot)
	}
	if req.Name == f.failName {
		return nil, errors.New("no room")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, req)
	return &api.Sandbox{ID: "id-" + req.Name, Name: req.Name, Labels: req.Labels}, nil
}

func (f *fakeCore) Delete(_ context.Context, ref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, ref)
	return nil
}

func (f *fakeCore) RecordFork(context.Context, *controller.ForkPoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recorded++
}

// TestForkMakesEveryCopyOrNone: a fork makes its copies in order of their
// names, a few at once, each with its own labels adjusted by the front
// end's function without touching the source's or another copy's, and is
// recorded once; when a copy fails, the copies made are removed, the
// error names the copy, and nothing is recorded; a source not found is
// the core's error.
func TestForkMakesEveryCopyOrNone(t *testing.T) {
	ctx := context.Background()

	t.Run("all", func(t *testing.T) {
		f := &fakeCore{}
		s := New(f, nil)
		res, err := s.ForkEach(ctx, "src", api.ForkRequest{Count: 10, NamePrefix: "x"}, func(src *api.Sandbox, i int, req *api.CreateSandboxRequest) {
			req.Labels["copy"] = fmt.Sprint(i)
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Sandboxes) != 10 || res.Snapshot.ID != "snap" {
			t.Fatalf("result: %+v", res)
		}
		for i, sb := range res.Sandboxes {
			if sb.Name != fmt.Sprintf("x-%d", i+1) || sb.Labels["copy"] != fmt.Sprint(i) || sb.Labels["team"] != "a" {
				t.Errorf("copy %d: %+v", i, sb)
			}
		}
		if got := f.most.Load(); got > parallel || got < 2 {
			t.Errorf("%d copies at once, want 2 to %d", got, parallel)
		}
		if f.recorded != 1 || len(f.deleted) != 0 {
			t.Errorf("recorded %d, deleted %v", f.recorded, f.deleted)
		}
	})

	t.Run("one fails", func(t *testing.T) {
		f := &fakeCore{failName: "y-2"}
		s := New(f, nil)
		_, err := s.Fork(ctx, "src", api.ForkRequest{Count: 3, NamePrefix: "y"})
		if err == nil || !strings.Contains(err.Error(), "fork copy 2") {
			t.Fatalf("fork with a failing copy: %v", err)
		}
		slices.Sort(f.deleted)
		if !slices.Equal(f.deleted, []string{"id-y-1", "id-y-3"}) {
			t.Errorf("removed %v, want the two copies made", f.deleted)
		}
		if f.recorded != 0 {
			t.Errorf("a failed fork was recorded")
		}
	})

	t.Run("no source", func(t *testing.T) {
		f := &fakeCore{}
		if _, err := New(f, nil).Fork(ctx, "missing", api.ForkRequest{}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("fork of a missing sandbox: %v", err)
		}
		if len(f.created) != 0 {
			t.Errorf("copies of a missing sandbox: %v", f.created)
		}
	})
}
