package warmpools_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

// TestPoolGrowsAfterABurst: a pool with max_ready above min_ready grows to
// the size of a burst that found it short, keeps that size while the
// burst is remembered, then shrinks back to min_ready without touching
// the sandboxes the burst was served; max_ready is validated; deleting the
// pool mid-refill leaves none of its sandboxes.
func TestPoolGrowsAfterABurst(t *testing.T) {
	var skew atomic.Int64
	// Refills (the pool loop's starts) wait while held, so that one is
	// surely in flight when the pool is deleted below.
	held := &heldRefills{release: make(chan struct{})}
	env := controllertest.New(t, controllertest.Options{
		Clock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
		Wrap: func(b *processbackend.Backend) runtime.Backend {
			held.Backend = b
			return held
		},
	})
	c := env.Controller
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 3*time.Minute)
	defer cancel()
	env.PutTemplate(ctx, t, "plain", "b1")
	for _, bad := range []api.SetPoolRequest{
		{Template: "plain", MinReady: 2, MaxReady: 1},
		{Template: "plain", MinReady: 1, MaxReady: api.MaxPoolMaxReady + 1},
		{Template: "plain", MinReady: 1, MaxReady: -1},
	} {
		if _, err := env.Pools.Set(ctx, "burst", bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("SetPool(%+v) = %v, want invalid", bad, err)
		}
	}
	p, err := env.Pools.Set(ctx, "burst", api.SetPoolRequest{Template: "plain", MinReady: 1, MaxReady: 4})
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxReady != 4 || p.Target != 1 {
		t.Fatalf("new pool: %+v, want max_ready 4 and target 1", p)
	}
	go env.Pools.Run(ctx)
	waitPool := func(what string, ok func(*api.Pool) bool) *api.Pool {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			p, err := env.Pools.Get(ctx, "burst")
			if err != nil {
				t.Fatal(err)
			}
			if ok(p) {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: pool %+v", what, p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPool("one ready", func(p *api.Pool) bool { return p.Ready == 1 && p.Starting == 0 })

	// burst makes n sandboxes of the template at once.
	burst := func(n int) []string {
		var wg sync.WaitGroup
		ids := make([]string, n)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := c.Create(ctx, api.CreateSandboxRequest{Template: "plain"})
				if err != nil {
					t.Errorf("create %d: %v", i, err)
					return
				}
				ids[i] = sb.ID
			}()
		}
		wg.Wait()
		return ids
	}
	// A burst of four: one served, the rest cold.
	ids := burst(4)
	if t.Failed() {
		return
	}
	p = waitPool("four ready after the burst", func(p *api.Pool) bool { return p.Ready == 4 && p.Starting == 0 })
	if p.Target != 4 || p.Served+p.Cold != 4 || p.Served < 1 {
		t.Errorf("after the burst: %+v, want target 4 and the four creates counted", p)
	}
	// It stays at four while the burst is remembered.
	skew.Store(int64(9 * time.Minute))
	time.Sleep(6 * time.Second) // a pass of the pool loop
	if p, err := env.Pools.Get(ctx, "burst"); err != nil || p.Target != 4 || p.Ready != 4 {
		t.Errorf("nine minutes on: %+v, %v; want target 4 and four ready", p, err)
	}

	// Past its memory the pool shrinks back; the served sandboxes stay.
	skew.Store(int64(11 * time.Minute))
	waitPool("back to one ready", func(p *api.Pool) bool { return p.Target == 1 && p.Ready == 1 && p.Starting == 0 })
	for _, id := range ids {
		sb, err := c.Get(ctx, id)
		if err != nil || sb.State != api.StateRunning {
			t.Errorf("served sandbox %s after the shrink: %+v, %v", id, sb, err)
		}
	}
	// The ones it let go are destroyed in the background: wait for the
	// list to settle on the served four and the one ready.
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, err := c.List(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) == len(ids)+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listed %d sandboxes after the shrink, want the %d served and the one ready", len(all), len(ids))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Deleting the pool while it refills leaves none of its unclaimed
	// sandboxes, those of refills in flight included.
	held.on.Store(true)
	more := burst(3)
	waitPool("a refill in flight", func(p *api.Pool) bool { return p.Starting > 0 })
	// Deleting waits for the refills in flight, which go on meanwhile.
	time.AfterFunc(200*time.Millisecond, func() { close(held.release) })
	if err := env.Pools.Delete(ctx, "burst"); err != nil {
		t.Fatal(err)
	}
	all, err := c.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		if _, unclaimed := sb.Labels["paddock.dev/pool-ready"]; unclaimed {
			t.Errorf("sandbox %s of the deleted pool is left: labels %v", sb.ID, sb.Labels)
		}
	}
	if len(all) != len(ids)+len(more) {
		t.Errorf("listed %d sandboxes after the pool's deletion, want the %d served", len(all), len(ids)+len(more))
	}
}

// heldRefills holds the pool loop's starts (caller "paddock-pool") while
// on is set, until release is closed.
type heldRefills struct {
	*processbackend.Backend
	on      atomic.Bool
	release chan struct{}
}

func (h *heldRefills) Start(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	if h.on.Load() && controller.Caller(ctx) == "paddock-pool" {
		select {
		case <-h.release:
		case <-ctx.Done():
			return runtime.Info{}, ctx.Err()
		}
	}
	return h.Backend.Start(ctx, spec)
}
