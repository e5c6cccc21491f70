package stats

import (
	"errors"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
)

func TestHostStatsRing(t *testing.T) {
	var s Ring
	t0 := time.Date(2026, 12, 4, 10, 0, 30, 0, time.UTC)
	for _, ms := range []int{3, 40, 40, 40, 90, 90, 90, 90, 90, 4000} {
		s.Created(t0, time.Duration(ms)*time.Millisecond, nil)
	}
	s.Created(t0, time.Second, errors.New("refused"))
	s.Pool(t0, true)
	s.Pool(t0, true)
	s.Pool(t0, false)
	s.Sampled(t0, map[string]int{api.StateRunning: 3})

	w := s.Window(t0)
	if len(w) != api.StatsMinutes || !w[len(w)-1].Start.Equal(t0.Truncate(time.Minute)) {
		t.Fatalf("window: %d minutes ending %v", len(w), w[len(w)-1].Start)
	}
	m := w[len(w)-1]
	if m.Creates != 11 || m.CreateErrors != 1 || m.PoolServed != 2 || m.PoolCold != 1 || m.States[api.StateRunning] != 3 {
		t.Errorf("the minute: %+v", m)
	}
	// Ten successes: the 5th (p50) is in (50, 100], the 10th (p95) in (2500, 5000].
	if m.CreateP50Ms != 100 || m.CreateP95Ms != 5000 {
		t.Errorf("p50 %d, p95 %d; want 100 and 5000", m.CreateP50Ms, m.CreateP95Ms)
	}
	if w[0].Creates != 0 || w[0].States != nil {
		t.Errorf("an empty minute: %+v", w[0])
	}

	// An hour later the slot is reused: the old minute is gone, not added to.
	t1 := t0.Add(time.Hour)
	s.Created(t1, 7*time.Millisecond, nil)
	w = s.Window(t1)
	if m := w[len(w)-1]; m.Creates != 1 || m.CreateP50Ms != 10 || m.PoolServed != 0 || m.States != nil {
		t.Errorf("the same slot an hour later: %+v", m)
	}
	for _, m := range w[:len(w)-1] {
		if m.Creates != 0 {
			t.Errorf("minute %v kept %d creates from over an hour before", m.Start, m.Creates)
		}
	}
	// A create slower than the last bound is above it.
	var slow Ring
	slow.Created(t0, time.Hour, nil)
	if got := slow.Window(t0)[api.StatsMinutes-1].CreateP50Ms; got <= latencyBoundsMs[len(latencyBoundsMs)-1] {
		t.Errorf("an hour-long create's p50: %d", got)
	}
}
