package pools

import (
	"sync"
	"time"
)

// A pool that may grow (max_ready above min_ready) sizes itself from the
// creates that asked for it: its target is the most creates that arrived
// within any demandWindow of the last demandMemory, between min_ready and
// max_ready. A burst of 100 therefore makes the pool hold 100 until ten
// minutes pass without such a burst; then it shrinks back, a step per pass.
const (
	// demandWindow is the span over which arrivals count as one burst:
	// long enough to hold a burst that a client spreads over a few
	// seconds, short enough that a steady trickle is not taken for one.
	demandWindow = 10 * time.Second
	// demandMemory is how long a burst keeps the pool at its size.
	demandMemory = 10 * time.Minute
)

// demandSlots is the number of one-second counters a demand keeps.
const demandSlots = int(demandMemory / time.Second)

// demand counts a pool's arrivals per second over demandMemory, in a ring
// of fixed size: its cost does not grow with the arrivals.
type demand struct {
	mu    sync.Mutex
	slots [demandSlots]int32
	// epoch is the second (Unix) of the newest slot; slot i holds second
	// epoch-(head-i) modulo the ring.
	epoch int64
	head  int
}

// advance moves the ring to the second now, clearing the slots it passes.
func (d *demand) advance(now time.Time) {
	sec := now.Unix()
	if d.epoch == 0 {
		d.epoch = sec
		return
	}
	steps := sec - d.epoch
	if steps <= 0 {
		return
	}
	if steps > int64(demandSlots) {
		steps = int64(demandSlots)
	}
	for i := int64(0); i < steps; i++ {
		d.head = (d.head + 1) % demandSlots
		d.slots[d.head] = 0
	}
	d.epoch = sec
}

// add counts one arrival at now.
func (d *demand) add(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.advance(now)
	if d.slots[d.head] < 1<<30 {
		d.slots[d.head]++
	}
}

// Peak is the most arrivals within any demandWindow of the last
// demandMemory, as of now.
func (d *demand) peak(now time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.advance(now)
	w := int(demandWindow / time.Second)
	best, sum := 0, 0
	// Walk from the oldest slot to the newest with a running window sum.
	for i := 0; i < demandSlots; i++ {
		idx := (d.head + 1 + i) % demandSlots
		sum += int(d.slots[idx])
		if i >= w {
			sum -= int(d.slots[(idx-w+demandSlots)%demandSlots])
		}
		best = max(best, sum)
	}
	return best
}

// Target is how many sandboxes a pool keeps ready: min_ready, or its
// recent peak demand when that is more, at most max_ready (0 or below
// min_ready: the pool does not grow).
func Target(minReady, maxReady, peak int) int {
	if maxReady <= minReady {
		return minReady
	}
	return min(max(minReady, peak), maxReady)
}

// Arrived counts a create that asked for pool (served or cold).
func (p *State) Arrived(pool string, now time.Time) {
	p.demandOf(pool).add(now)
}

// Peak is pool's recent peak demand.
func (p *State) Peak(pool string, now time.Time) int {
	return p.demandOf(pool).peak(now)
}

func (p *State) demandOf(pool string) *demand {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.demand[pool]
	if d == nil {
		d = &demand{}
		p.demand[pool] = d
	}
	return d
}

// Forget drops a deleted pool's counters.
func (p *State) Forget(pool string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.demand, pool)
	delete(p.retry, pool)
	delete(p.ready, pool)
}
