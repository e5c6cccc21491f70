package events

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// TestHub: a subscription gets, in order, only the events about owners it
// may see; a closed one gets nothing more; one that falls Buffer events
// behind is cut off (Lagged closes) and keeps what it had queued.
func TestHub(t *testing.T) {
	var h Hub
	if h.Active() {
		t.Fatal("a new hub is active")
	}
	mine := h.Subscribe(func(owner string) bool { return owner == "a" }, false)
	all := h.Subscribe(func(string) bool { return true }, false)
	if !h.Active() {
		t.Fatal("a hub with subscriptions is not active")
	}
	for i, owner := range []string{"a", "b", "a"} {
		h.Publish(api.Event{Type: api.StreamSandbox, Reason: string(rune('0' + i))}, owner)
	}
	if got := drain(mine); got != "02" {
		t.Errorf("owner a's subscription got %q, want 02", got)
	}
	if got := drain(all); got != "012" {
		t.Errorf("scope all's subscription got %q, want 012", got)
	}
	mine.Close()
	h.Publish(api.Event{Type: api.StreamSandbox, Reason: "3"}, "a")
	if got := drain(mine); got != "" {
		t.Errorf("a closed subscription got %q", got)
	}
	for range Buffer + 1 {
		h.Publish(api.Event{Type: api.StreamSandbox, Reason: "x"}, "b")
	}
	select {
	case <-all.Lagged():
	default:
		t.Fatal("a subscription Buffer+1 events behind is not cut off")
	}
	if n := len(drain(all)); n != Buffer { // the "3" and as many of the rest as fitted
		t.Errorf("a cut-off subscription kept %d events, want %d", n, Buffer)
	}
	if h.Active() {
		t.Error("the hub is active with every subscription closed or cut off")
	}
}

// TestUsageSamples: a subscription that asks for usage gets a sample at
// once, with only the sandboxes it may see; one that does not ask gets
// none; with no source set, usage subscriptions get no samples.
func TestUsageSamples(t *testing.T) {
	var h Hub
	done := make(chan struct{})
	defer close(done)
	h.SetUsageSource(UsageSource{
		Live: func(context.Context) ([]Sandbox, error) {
			return []Sandbox{{ID: "sa", Runtime: "runc", Owner: "a"}, {ID: "sb", Runtime: "runc", Owner: "b"}}, nil
		},
		Read: func(_ context.Context, id, _ string) (runtime.Usage, error) {
			return runtime.Usage{MemoryBytes: 1 << 20, CPUNanos: 1}, nil
		},
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Done: done,
	})
	plain := h.Subscribe(func(string) bool { return true }, false)
	defer plain.Close()
	s := h.Subscribe(func(owner string) bool { return owner == "a" }, true)
	defer s.Close()
	select {
	case ev := <-s.Events():
		if ev.Type != api.StreamUsage || len(ev.Usage) != 1 || ev.Usage[0].ID != "sa" || ev.Usage[0].MemoryBytes != 1<<20 {
			t.Errorf("first usage event %+v, want one sample of sa", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no usage sample within 10 s")
	}
	if got := drain(plain); got != "" {
		t.Errorf("a subscription without usage got events %q", got)
	}

	var bare Hub
	u := bare.Subscribe(func(string) bool { return true }, true)
	defer u.Close()
	select {
	case ev := <-u.Events():
		t.Errorf("a hub without a usage source sent %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}

// drain returns the reasons of the events queued for s (a usage event
// counts as "u").
func drain(s *Subscription) string {
	var out string
	for {
		select {
		case ev := <-s.Events():
			if ev.Type == api.StreamUsage {
				out += "u"
			} else {
				out += ev.Reason
			}
		default:
			return out
		}
	}
}
