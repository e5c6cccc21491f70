// Package pools is the warm pools' bookkeeping in the daemon's memory:
// the refills in flight and what each pool served, the arrivals a pool
// that may grow sizes itself by (demand.go), the queue of ready sandboxes
// a claim takes from (ready.go), the wait after failed refills
// (retry.go), and the wake-ups of the pool loop (claim.go). Which
// sandboxes a pool holds is not here: that is in their records' labels,
// which the pool loop reads and writes when it tends a pool
// (internal/controller/warmpools) and the controller's core when it claims
// from one (internal/controller/templatecreate.go). Everything here is safe for
// concurrent use and forgotten on restart.
package pools

import (
	"sync"
	"time"
)

// MaxRefillsInFlight bounds how many sandboxes one pool starts at once, so
// a refill does not starve the creates it exists to speed up.
const MaxRefillsInFlight = 2

// State is every pool's bookkeeping. Make it with New.
type State struct {
	mu       sync.Mutex
	wake     chan struct{}
	starting map[string]int
	served   map[string]int64
	cold     map[string]int64
	lastErr  map[string]string
	idMu     map[string]*sync.Mutex // identifier bindings, per pool
	building map[string]bool        // build sandboxes of this daemon
	demand   map[string]*demand     // arrivals per pool (demand.go)
	retry    map[string]refillRetry // waits after failed refills (retry.go)
	ready    map[string]*readyQueue // ready sandboxes to claim (ready.go)
	// clusterSize is the size last set on a backend's pool.
	clusterSize map[string]int
}

// New makes an empty State.
func New() *State {
	return &State{
		wake:        make(chan struct{}, 1),
		starting:    map[string]int{},
		served:      map[string]int64{},
		cold:        map[string]int64{},
		lastErr:     map[string]string{},
		idMu:        map[string]*sync.Mutex{},
		building:    map[string]bool{},
		demand:      map[string]*demand{},
		retry:       map[string]refillRetry{},
		ready:       map[string]*readyQueue{},
		clusterSize: map[string]int{},
	}
}

// Stats is what a pool shows of its bookkeeping.
type Stats struct {
	// Starting is the refills in flight.
	Starting int
	// Served and Cold count the creates it answered from a ready
	// sandbox and those it could not (started cold).
	Served, Cold int64
	// Error is the last refill's failure, "" after a success.
	Error string
}

// Stats returns pool's bookkeeping.
func (p *State) Stats(pool string) Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Starting: p.starting[pool], Served: p.served[pool], Cold: p.cold[pool], Error: p.lastErr[pool]}
}

// Starting is pool's refills in flight.
func (p *State) Starting(pool string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starting[pool]
}

// Reserve takes the refills pool starts now to go from ready (and those
// in flight) to target: none while it waits after a failure (retry.go),
// at most MaxRefillsInFlight in flight. Each one reserved is counted in
// flight until RefillDone.
func (p *State) Reserve(pool string, target, ready int, now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	need := target - ready - p.starting[pool]
	if p.waitingLocked(pool, now) {
		need = 0
	}
	if room := MaxRefillsInFlight - p.starting[pool]; need > room {
		need = room
	}
	if need > 0 {
		p.starting[pool] += need
	}
	return max(need, 0)
}

// RefillDone ends a refill Reserve counted and wakes the pool loop.
func (p *State) RefillDone(pool string) {
	p.mu.Lock()
	p.starting[pool]--
	p.mu.Unlock()
	p.Kick()
}

// Served counts a create that a ready sandbox of pool answered.
func (p *State) Served(pool string) { p.count(p.served, pool) }

// Cold counts a create of pool that found no ready sandbox.
func (p *State) Cold(pool string) { p.count(p.cold, pool) }

func (p *State) count(m map[string]int64, pool string) {
	p.mu.Lock()
	m[pool]++
	p.mu.Unlock()
}

// SetError records what pool shows as its error ("" clears it).
func (p *State) SetError(pool, msg string) {
	p.mu.Lock()
	p.lastErr[pool] = msg
	p.mu.Unlock()
}

// Error is the error pool shows.
func (p *State) Error(pool string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr[pool]
}

// SetClusterSize records the size set on pool's backend pool and returns
// the one before, if any.
func (p *State) SetClusterSize(pool string, n int) (prev int, had bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, had = p.clusterSize[pool]
	p.clusterSize[pool] = n
	return prev, had
}

// ForgetClusterSize drops the size recorded for pool's backend pool.
func (p *State) ForgetClusterSize(pool string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.clusterSize, pool)
}

// Wake receives when the pool loop should look again (Kick).
func (p *State) Wake() <-chan struct{} { return p.wake }

// Kick asks the pool loop to look again soon.
func (p *State) Kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// IdentifierLock is pool's lock for binding a create's identifier to one
// of its sandboxes.
func (p *State) IdentifierLock(pool string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.idMu[pool]
	if m == nil {
		m = &sync.Mutex{}
		p.idMu[pool] = m
	}
	return m
}

// SetBuilding marks id as a template build sandbox of this daemon (on) or
// no longer one.
func (p *State) SetBuilding(id string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.building[id] = true
	} else {
		delete(p.building, id)
	}
}

// Building reports whether id is a build sandbox this daemon runs.
func (p *State) Building(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.building[id]
}
