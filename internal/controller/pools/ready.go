package pools

// Each pool's ready sandboxes as this daemon knows them, in the order
// they became ready, so that a claim takes the next one instead of
// reading every sandbox of the host to find the pool's (that read, one
// per claim, was most of a burst's time: a hundred claims arriving at
// once made a hundred full reads, each longer as the pool grew).
//
// The queue is a hint, never the truth: a claim checks the sandbox's
// record under its lock before it serves it, and drops an id that is no
// longer ready (claimed, shrunk away, of an older build, destroyed). It
// is filled by the refills that ready a sandbox, by each pass of the pool
// loop (which lists the pool's members anyway, and so brings back any id
// dropped while busy and the ready sandboxes a previous daemon left), and,
// before the first of those, by one read of the store.

// readyQueue is one pool's queue.
type readyQueue struct {
	ids    []string
	queued map[string]bool
	// loaded: the queue has been filled from the store at least once,
	// so an empty queue means the pool has none ready.
	loaded bool
}

// OfferReady queues ids of pool (those queued already keep their place)
// and marks the queue loaded.
func (p *State) OfferReady(pool string, ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.ready[pool]
	if q == nil {
		q = &readyQueue{queued: map[string]bool{}}
		p.ready[pool] = q
	}
	q.loaded = true
	for _, id := range ids {
		if !q.queued[id] {
			q.queued[id] = true
			q.ids = append(q.ids, id)
		}
	}
}

// TakeReady removes and returns the first queued id of pool; loaded says
// whether an empty queue can be believed.
func (p *State) TakeReady(pool string) (id string, ok, loaded bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.ready[pool]
	if q == nil {
		return "", false, false
	}
	if len(q.ids) == 0 {
		return "", false, q.loaded
	}
	id = q.ids[0]
	q.ids[0] = ""
	q.ids = q.ids[1:]
	delete(q.queued, id)
	return id, true, true
}
