package controller

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestLifetimeEndsOnTime checks that SetTimeout's end lands at its
// deadline, not at the next idle check: the idle interval here is a
// minute, far longer than the lifetime.
func TestLifetimeEndsOnTime(t *testing.T) {
	ctx := System(context.Background())
	c, _ := newSnapshotController(t)
	c.opts.IdleInterval = time.Minute
	c.opts.Backends = map[string]runtime.Backend{} // nothing to reconcile
	c.log = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	if err := c.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// A runtime the controller does not have: destroy only records the end.
	rec := &store.Sandbox{ID: "sblife", State: api.StateRunning, Runtime: "none", CreatedAt: time.Now().UTC().Add(-3 * time.Second)}
	if err := c.opts.Store.CreateSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	const d = 1500 * time.Millisecond
	set := time.Now()
	if _, err := c.SetTimeout(ctx, rec.ID, d); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := c.opts.Store.GetSandbox(ctx, rec.ID)
		gone := errors.Is(err, errdefs.ErrNotFound) || (err == nil && got.State == api.StateDestroyed)
		if err != nil && !gone {
			t.Fatal(err)
		}
		el := time.Since(set)
		if gone {
			// Late by scheduling at most (a loaded two-core host took
			// 320 ms); the minute-long idle check would be a minute late.
			if el < d-50*time.Millisecond || el > d+900*time.Millisecond {
				t.Fatalf("ended %v after SetTimeout(%v)", el, d)
			}
			t.Logf("ended %v after SetTimeout(%v)", el, d)
			return
		}
		if el > d+2*time.Second {
			t.Fatalf("still there %v after SetTimeout(%v)", el, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
