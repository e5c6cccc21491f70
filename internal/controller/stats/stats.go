// Package stats keeps the last hour of what the console charts for an
// operator (creates and their latency, pool claims, sandboxes by state),
// a minute at a time in a ring: its memory does not grow with traffic.
// It sits beneath the controller, which counts into it.
package stats

import (
	"maps"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// latencyBoundsMs are the upper bounds of the create latency histogram's
// buckets; a create slower than the last falls in one more.
var latencyBoundsMs = [...]int64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000}

// minuteStats is one minute of a Ring.
type minuteStats struct {
	minute       int64 // unix minute; a slot holding an older one is stale
	creates      int
	createErrors int
	latency      [len(latencyBoundsMs) + 1]int
	poolServed   int
	poolCold     int
	states       map[string]int
}

// Ring is the last api.StatsMinutes minutes. Its zero value is ready.
type Ring struct {
	mu   sync.Mutex
	ring [api.StatsMinutes]minuteStats
}

// at returns now's minute, cleared if its slot held an older one. Under mu.
func (s *Ring) at(now time.Time) *minuteStats {
	m := now.Unix() / 60
	slot := &s.ring[m%api.StatsMinutes]
	if slot.minute != m {
		*slot = minuteStats{minute: m}
	}
	return slot
}

// Created counts a create that ended at now after took, failed if err.
func (s *Ring) Created(now time.Time, took time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.at(now)
	m.creates++
	if err != nil {
		m.createErrors++
		return
	}
	ms, i := took.Milliseconds(), 0
	for i < len(latencyBoundsMs) && ms > latencyBoundsMs[i] {
		i++
	}
	m.latency[i]++
}

// Pool counts a create from a pool: served from it, or created cold.
func (s *Ring) Pool(now time.Time, served bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.at(now); served {
		m.poolServed++
	} else {
		m.poolCold++
	}
}

// Sampled records the sandboxes by state at now.
func (s *Ring) Sampled(now time.Time, states map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at(now).states = states
}

// percentile is the upper bound of the bucket holding the p-th fraction
// of the successful creates, or 0 when there were none.
func (m *minuteStats) percentile(p float64) int64 {
	total := 0
	for _, n := range m.latency {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank, seen := int(p*float64(total)+0.999999), 0
	for i, n := range m.latency {
		if seen += n; seen >= rank {
			if i < len(latencyBoundsMs) {
				return latencyBoundsMs[i]
			}
			break
		}
	}
	return latencyBoundsMs[len(latencyBoundsMs)-1] + 1
}

// Window is the last api.StatsMinutes minutes up to now, oldest first.
func (s *Ring) Window(now time.Time) []api.StatsMinute {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := now.Unix() / 60
	out := make([]api.StatsMinute, 0, api.StatsMinutes)
	for m := cur - api.StatsMinutes + 1; m <= cur; m++ {
		sm := api.StatsMinute{Start: time.Unix(m*60, 0).UTC()}
		if slot := &s.ring[m%api.StatsMinutes]; slot.minute == m {
			sm.Creates, sm.CreateErrors = slot.creates, slot.createErrors
			sm.CreateP50Ms, sm.CreateP95Ms = slot.percentile(0.5), slot.percentile(0.95)
			sm.PoolServed, sm.PoolCold = slot.poolServed, slot.poolCold
			sm.States = maps.Clone(slot.states)
		}
		out = append(out, sm)
	}
	return out
}
