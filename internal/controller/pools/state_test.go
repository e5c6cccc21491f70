package pools

import (
	"testing"
	"time"
)

// TestReserve: refills are reserved up to the target, never more than
// MaxRefillsInFlight at once, none while a failure's wait runs, and each
// one ended frees its place and wakes the loop.
func TestReserve(t *testing.T) {
	p := New()
	now := time.Unix(1_800_000_000, 0)
	if got := p.Reserve("a", 5, 1, now); got != MaxRefillsInFlight {
		t.Fatalf("Reserve(target 5, ready 1) = %d, want %d", got, MaxRefillsInFlight)
	}
	if got := p.Reserve("a", 5, 1, now); got != 0 {
		t.Fatalf("Reserve with %d in flight = %d, want 0", MaxRefillsInFlight, got)
	}
	if got := p.Reserve("b", 1, 3, now); got != 0 {
		t.Fatalf("Reserve above target = %d, want 0", got)
	}
	select {
	case <-p.Wake():
		t.Fatal("woken before any refill ended")
	default:
	}
	p.RefillDone("a")
	select {
	case <-p.Wake():
	default:
		t.Fatal("a refill ended without waking the pool loop")
	}
	if got := p.Stats("a").Starting; got != 1 {
		t.Fatalf("starting after one of two ended = %d, want 1", got)
	}
	if got := p.Reserve("a", 2, 0, now); got != 1 {
		t.Fatalf("Reserve(target 2, ready 0, 1 in flight) = %d, want 1", got)
	}

	// A failure makes the pool wait, longer after each failure in a row.
	first := p.RefillFailed("c", now)
	if got := p.Reserve("c", 3, 0, now.Add(first/2)); got != 0 {
		t.Fatalf("Reserve while waiting after a failure = %d, want 0", got)
	}
	if again := p.RefillFailed("c", now.Add(first/2)); again != first/2 {
		t.Fatalf("a failure within the wait: %s left, want %s (failures together count once)", again, first/2)
	}
	second := p.RefillFailed("c", now.Add(first))
	if second <= first {
		t.Fatalf("wait after a second failure in a row %s, want more than %s", second, first)
	}
	p.RefillSucceeded("c")
	if got := p.Reserve("c", 1, 0, now.Add(first)); got != 1 {
		t.Fatalf("Reserve after a success = %d, want 1", got)
	}
}

func TestCountsAndErrors(t *testing.T) {
	p := New()
	p.Served("a")
	p.Served("a")
	p.Cold("a")
	p.SetError("a", "disk full")
	if st := p.Stats("a"); st.Served != 2 || st.Cold != 1 || st.Error != "disk full" {
		t.Fatalf("stats = %+v", st)
	}
	p.SetError("a", "")
	if p.Error("a") != "" {
		t.Fatal("error not cleared")
	}
	if prev, had := p.SetClusterSize("a", 3); had {
		t.Fatalf("first cluster size had a previous one: %d", prev)
	}
	if prev, had := p.SetClusterSize("a", 5); !had || prev != 3 {
		t.Fatalf("previous cluster size = %d, %v; want 3", prev, had)
	}
	p.ForgetClusterSize("a")
	if _, had := p.SetClusterSize("a", 1); had {
		t.Fatal("a forgotten cluster size came back")
	}
	first, again, other := p.IdentifierLock("a"), p.IdentifierLock("a"), p.IdentifierLock("b")
	if first != again || first == other {
		t.Fatal("identifier locks are not one per pool")
	}
	p.SetBuilding("x", true)
	if !p.Building("x") {
		t.Fatal("build sandbox not marked")
	}
	p.SetBuilding("x", false)
	if p.Building("x") {
		t.Fatal("build sandbox still marked")
	}
}
