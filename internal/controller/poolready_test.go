package controller

import "testing"

// TestReadyQueue: ids come out in the order they were first offered, an id
// offered twice is queued once, and an empty queue is believed only once
// the pool has been loaded (offered to, even with nothing).
func TestReadyQueue(t *testing.T) {
	var p poolState
	if _, ok, loaded := p.takeReady("a"); ok || loaded {
		t.Fatalf("new pool: ok %v loaded %v, want neither", ok, loaded)
	}
	p.offerReady("a")
	if _, ok, loaded := p.takeReady("a"); ok || !loaded {
		t.Fatalf("pool loaded empty: ok %v loaded %v, want loaded and none", ok, loaded)
	}
	p.offerReady("a", "x", "y")
	p.offerReady("a", "y", "z", "x")
	p.offerReady("b", "w")
	var got []string
	for {
		id, ok, _ := p.takeReady("a")
		if !ok {
			break
		}
		got = append(got, id)
	}
	if len(got) != 3 || got[0] != "x" || got[1] != "y" || got[2] != "z" {
		t.Errorf("taken %v, want [x y z]", got)
	}
	// Taken, an id may be offered again (a claim refused by admission).
	p.offerReady("a", "x")
	if id, ok, _ := p.takeReady("a"); !ok || id != "x" {
		t.Errorf("offered again: %q %v, want x", id, ok)
	}
	p.forget("b")
	if _, ok, loaded := p.takeReady("b"); ok || loaded {
		t.Errorf("forgotten pool: ok %v loaded %v, want neither", ok, loaded)
	}
}
