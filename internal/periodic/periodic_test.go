package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestRun: a pass at once, more at the interval, none after the context
// ends, and Run returns then.
func TestRun(t *testing.T) {
	var passes atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, 20*time.Millisecond, func(context.Context) { passes.Add(1) })
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for passes.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	after := passes.Load()
	if after < 3 {
		t.Fatalf("%d passes in 5s at a 20ms interval", after)
	}
	time.Sleep(60 * time.Millisecond)
	if passes.Load() != after {
		t.Error("a pass ran after Run returned")
	}

	// A context already ended still gets the first pass (start-up work).
	passes.Store(0)
	Run(ctx, time.Hour, func(context.Context) { passes.Add(1) })
	if passes.Load() != 1 {
		t.Errorf("an ended context got %d passes, want the first", passes.Load())
	}
}
