package pools

import (
	"testing"
	"time"
)

func TestDemandPeak(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var d demand
	if got := d.peak(t0); got != 0 {
		t.Fatalf("peak of nothing = %d", got)
	}
	at := func(off time.Duration, n int) {
		for i := 0; i < n; i++ {
			d.add(t0.Add(off))
		}
	}
	at(0, 5)
	at(5*time.Second, 3) // same 10 s window as the first five
	at(30*time.Second, 4)
	if got := d.peak(t0.Add(40 * time.Second)); got != 8 {
		t.Errorf("peak = %d, want 8 (5 and 3 within 10 s)", got)
	}
	// Ten seconds apart are two windows.
	var e demand
	e.add(t0)
	e.add(t0.Add(10 * time.Second))
	if got := e.peak(t0.Add(11 * time.Second)); got != 1 {
		t.Errorf("arrivals 10 s apart: peak = %d, want 1", got)
	}
	// The burst is remembered for demandMemory, then forgotten.
	if got := d.peak(t0.Add(demandMemory - time.Minute)); got != 8 {
		t.Errorf("peak before the memory ends = %d, want 8", got)
	}
	if got := d.peak(t0.Add(demandMemory + 31*time.Second)); got != 0 {
		t.Errorf("peak after the memory = %d, want 0", got)
	}
	// A jump far ahead clears everything; a clock going back changes nothing.
	at(demandMemory+40*time.Second, 2)
	if got := d.peak(t0.Add(100 * demandMemory)); got != 0 {
		t.Errorf("peak after a long jump = %d, want 0", got)
	}
	d.add(t0)
	if got := d.peak(t0.Add(100 * demandMemory)); got != 1 {
		t.Errorf("an arrival stamped in the past counts in the newest second: peak = %d, want 1", got)
	}
}

func TestPoolTarget(t *testing.T) {
	for _, c := range []struct{ min, max, peak, want int }{
		{2, 0, 50, 2},      // does not grow
		{2, 2, 50, 2},      // max = min: does not grow
		{2, 1, 50, 2},      // max below min: min
		{2, 10, 0, 2},      // no demand: min
		{2, 10, 7, 7},      // grows to the demand
		{2, 10, 50, 10},    // at most max
		{0, 100, 100, 100}, // a pool of nothing that a burst grows
	} {
		if got := Target(c.min, c.max, c.peak); got != c.want {
			t.Errorf("Target(%d, %d, %d) = %d, want %d", c.min, c.max, c.peak, got, c.want)
		}
	}
}
