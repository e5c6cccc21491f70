package pools

import "testing"

// TestReadyQueue: ids come out in the order they were first offered, an id
// offered twice is queued once, and an empty queue is believed only once
// the pool has been loaded (offered to, even with nothing).
func TestReadyQueue(t *testing.T) {
	p := New()
	if _, ok, loaded := p.TakeReady("a"); ok || loaded {
		t.Fatalf("new pool: ok %v loaded %v, want neither", ok, loaded)
	}
	p.OfferReady("a")
	if _, ok, loaded := p.TakeReady("a"); ok || !loaded {
		t.Fatalf("pool loaded empty: ok %v loaded %v, want loaded and none", ok, loaded)
	}
	p.OfferReady("a", "x", "y")
	p.OfferReady("a", "y", "z", "x")
	p.OfferReady("b", "w")
	var got []string
	for {
		id, ok, _ := p.TakeReady("a")
		if !ok {
			break
		}
		got = append(got, id)
	}
	if len(got) != 3 || got[0] != "x" || got[1] != "y" || got[2] != "z" {
		t.Errorf("taken %v, want [x y z]", got)
	}
	// Taken, an id may be offered again (a claim refused by admission).
	p.OfferReady("a", "x")
	if id, ok, _ := p.TakeReady("a"); !ok || id != "x" {
		t.Errorf("offered again: %q %v, want x", id, ok)
	}
	p.Forget("b")
	if _, ok, loaded := p.TakeReady("b"); ok || loaded {
		t.Errorf("forgotten pool: ok %v loaded %v, want neither", ok, loaded)
	}
}
