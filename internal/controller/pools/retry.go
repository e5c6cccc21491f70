package pools

import "time"

// A pool whose refill failed (the host's disk refused it, the admission
// policy changed, the runtime is broken) waits before its next refill,
// longer after each failure in a row, so that a pool that cannot be
// filled does not start, fail and log a sandbox every few milliseconds.
// A refill that succeeds, and any change to the pool, start it afresh.
const (
	refillRetryFirst = time.Second
	refillRetryMost  = 30 * time.Second
)

// refillRetry is one pool's wait: how long the last one was and when the
// pool may refill again.
type refillRetry struct {
	wait time.Duration
	at   time.Time
}

// RefillFailed records a refill of pool that failed at now and returns
// how long the pool waits before it refills again. Refills in flight
// together that fail together count once: only a failure after the
// current wait has passed makes the next one longer.
func (p *State) RefillFailed(pool string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.retry[pool]
	if now.Before(r.at) {
		return r.at.Sub(now)
	}
	r.wait = min(max(2*r.wait, refillRetryFirst), refillRetryMost)
	r.at = now.Add(r.wait)
	p.retry[pool] = r
	return r.wait
}

// RefillSucceeded ends pool's wait.
func (p *State) RefillSucceeded(pool string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.retry, pool)
}

// waitingLocked says whether pool must not refill yet at now; p.mu is
// held.
func (p *State) waitingLocked(pool string, now time.Time) bool {
	return now.Before(p.retry[pool].at)
}
