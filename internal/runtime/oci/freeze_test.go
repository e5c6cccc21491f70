package oci

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/runtimetest"
)

// TestFastFreeze freezes and thaws a real runc sandbox through its cgroup
// and checks that runc agrees at each step, in both directions: a direct
// freeze is undone by `runc resume`, and `runc pause` by a direct thaw.
func TestFastFreeze(t *testing.T) {
	layers, agentBin := fixtures(t, KindRunc)
	r := newTestRuntime(t, KindRunc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := runtimetest.NewID(t)
	info, err := r.Start(ctx, runtime.Spec{ID: id, Layers: layers, AgentBinary: agentBin, Resources: testResources()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Destroy(context.WithoutCancel(ctx), id) })
	if err := healthy(ctx, info.AgentSocket); err != nil {
		t.Fatal(err)
	}
	want := func(st runtime.Status) {
		t.Helper()
		if got, err := r.Status(ctx, id); err != nil || got != st {
			t.Fatalf("runc says %s (%v), want %s", got, err, st)
		}
	}
	if err := r.fastFreeze(id, true); err != nil {
		t.Fatalf("direct freeze: %v", err)
	}
	want(runtime.StatusPaused)
	if !r.frozen(id) {
		t.Fatal("frozen() = false after a direct freeze")
	}
	if err := r.simple(ctx, id, "resume"); err != nil {
		t.Fatalf("runc resume after a direct freeze: %v", err)
	}
	want(runtime.StatusRunning)
	if err := healthy(ctx, info.AgentSocket); err != nil {
		t.Fatalf("agent after runc resume: %v", err)
	}
	if err := r.simple(ctx, id, "pause"); err != nil {
		t.Fatal(err)
	}
	if err := r.fastFreeze(id, false); err != nil {
		t.Fatalf("direct thaw: %v", err)
	}
	want(runtime.StatusRunning)
	if err := healthy(ctx, info.AgentSocket); err != nil {
		t.Fatalf("agent after a direct thaw: %v", err)
	}
	// Pause and Resume take the direct path and keep the agent answering.
	for range 20 {
		if err := r.Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := r.Resume(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := healthy(ctx, info.AgentSocket); err != nil {
		t.Fatalf("agent after 20 cycles: %v", err)
	}
	// A sandbox that is gone falls back to runc, which says so.
	if err := r.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Pause(ctx, id); err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("Pause of a destroyed sandbox = %v, want a not-found error naming it", err)
	}
	if err := r.fastFreeze(id, true); err == nil {
		t.Fatal("direct freeze of a destroyed sandbox succeeded")
	}
}
