package controller

import (
	"context"
	"sync"
)

// createSlots bounds the creates each caller has starting at once
// (config.CreatesPerCaller). A caller's creates beyond that wait, in the
// order they came, for one of its own to finish; another caller's creates
// do not wait behind them. Without it a burst of a hundred from one key
// would have a hundred sandboxes starting on the host's few CPUs at once,
// and a create from anyone else would queue behind all of them.
type createSlots struct {
	mu    sync.Mutex
	slots map[string]chan struct{}
}

// acquire takes one of caller's n slots, waiting while all are taken, and
// returns its release. ctx ending while waiting returns ctx's error.
func (s *createSlots) acquire(ctx context.Context, caller string, n int) (func(), error) {
	s.mu.Lock()
	if s.slots == nil {
		s.slots = map[string]chan struct{}{}
	}
	ch := s.slots[caller]
	if ch == nil || cap(ch) != n {
		// A changed limit applies to new slots; creates holding the
		// old ones release into the old channel.
		ch = make(chan struct{}, n)
		s.slots[caller] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// inFlight is how many of caller's creates hold a slot.
func (s *createSlots) inFlight(caller string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.slots[caller])
}
