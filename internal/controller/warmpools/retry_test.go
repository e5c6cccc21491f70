package warmpools_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

// TestPoolRefillWaitsAfterFailures: a pool whose refills fail tries again
// after a wait that grows with each failure, not at once (before, a pool
// the host's disk could not hold started and failed a sandbox every few
// milliseconds, a log line each); the error is shown on the pool, and
// once starts work again the pool fills without being touched.
func TestPoolRefillWaitsAfterFailures(t *testing.T) {
	failing := &failingRefills{}
	failing.on.Store(true)
	env := controllertest.New(t, controllertest.Options{
		Wrap: func(b *processbackend.Backend) runtime.Backend {
			failing.Backend = b
			return failing
		},
	})
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()
	env.PutTemplate(ctx, t, "plain", "b1")
	if _, err := env.Pools.Set(ctx, "broken", api.SetPoolRequest{Template: "plain", MinReady: 2}); err != nil {
		t.Fatal(err)
	}
	go env.Pools.Run(ctx)

	// 2.5 s of failures: the first pass's two refills, the retry after
	// one second and the one after two more; without the wait it was
	// hundreds.
	time.Sleep(2500 * time.Millisecond)
	tries := failing.tries.Load()
	if tries < 2 || tries > 8 {
		t.Errorf("%d refills started in 2.5 s of failures, want 2 to 8", tries)
	}
	p, err := env.Pools.Get(ctx, "broken")
	if err != nil {
		t.Fatal(err)
	}
	if p.Ready != 0 || p.Error == "" {
		t.Errorf("pool while its starts fail: %+v, want none ready and the error shown", p)
	}

	// Starts work again: the pool fills at its next try (at most the
	// longest wait so far, four seconds here) and clears its error.
	failing.on.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := env.Pools.Get(ctx, "broken")
		if err != nil {
			t.Fatal(err)
		}
		if p.Ready == 2 && p.Error == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool after starts work again: %+v, want two ready and no error", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := env.Pools.Delete(ctx, "broken"); err != nil {
		t.Fatal(err)
	}
}

// failingRefills fails the pool loop's starts (caller "paddock-pool")
// while on is set, counting them.
type failingRefills struct {
	*processbackend.Backend
	on    atomic.Bool
	tries atomic.Int64
}

func (f *failingRefills) Start(ctx context.Context, spec runtime.Spec) (runtime.Info, error) {
	if controller.Caller(ctx) == "paddock-pool" {
		f.tries.Add(1)
		if f.on.Load() {
			return runtime.Info{}, errors.New("the runtime refused the start")
		}
	}
	return f.Backend.Start(ctx, spec)
}
