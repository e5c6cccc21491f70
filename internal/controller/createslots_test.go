package controller_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

// gatedBackend holds every start whose spec carries GATE=1 until open is
// closed, and counts the starts that reached it.
type gatedBackend struct {
	*processbackend.Backend
	open    chan struct{}
	started atomic.Int32
}

func (g *gatedBackend) Start(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	if slices.Contains(spec.Env, "GATE=1") {
		g.started.Add(1)
		select {
		case <-g.open:
		case <-ctx.Done():
			return runtime.Info{}, ctx.Err()
		}
	}
	return g.Backend.Start(ctx, spec)
}

// TestCreatesPerCaller: one caller's creates beyond creates_per_caller wait
// for its earlier ones, in turn, while another caller's create goes ahead;
// a waiting create whose caller gives up leaves nothing behind.
func TestCreatesPerCaller(t *testing.T) {
	gb := &gatedBackend{open: make(chan struct{})}
	env := controllertest.New(t, controllertest.Options{
		Config: func(c *config.Config) { c.CreatesPerCaller = 2 },
		Wrap: func(b *processbackend.Backend) runtime.Backend {
			gb.Backend = b
			return gb
		},
	})
	t.Cleanup(func() {
		select {
		case <-gb.open:
		default:
			close(gb.open)
		}
	})
	c := env.Controller
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const keyA, keyB = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	ctxA := controller.WithCaller(base, keyA, api.KeyScopeOwn)
	ctxB := controller.WithCaller(base, keyB, api.KeyScopeOwn)
	gated := api.CreateSandboxRequest{Image: controllertest.Image, Env: map[string]string{"GATE": "1"}}

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Create(ctxA, gated)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for gb.started.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for a third to start, were it allowed
	if n := gb.started.Load(); n != 2 {
		t.Fatalf("%d of caller A's four creates reached the runtime, want 2 (its limit)", n)
	}

	// Another caller is not held up by A's queue.
	bctx, bcancel := context.WithTimeout(ctxB, 20*time.Second)
	defer bcancel()
	if _, err := c.Create(bctx, api.CreateSandboxRequest{Image: controllertest.Image}); err != nil {
		t.Fatalf("caller B's create while A's wait: %v", err)
	}

	// A create of A's that gives up while waiting records nothing.
	before, err := c.List(ctxA, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, scancel := context.WithTimeout(ctxA, 200*time.Millisecond)
	defer scancel()
	if _, err := c.Create(short, gated); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a waiting create whose caller gave up: %v, want the deadline", err)
	}
	if after, err := c.List(ctxA, nil); err != nil || len(after) != len(before) {
		t.Errorf("caller A's sandboxes went from %d to %d (%v) after a create gave up waiting", len(before), len(after), err)
	}

	close(gb.open)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller A's create %d: %v", i, err)
		}
	}
	if n := gb.started.Load(); n != 4 {
		t.Errorf("%d of A's creates reached the runtime, want all 4", n)
	}
	if list, err := c.List(ctxA, nil); err != nil || len(list) != 4 {
		t.Errorf("caller A has %d sandboxes (%v), want 4", len(list), err)
	}
}
