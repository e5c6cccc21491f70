package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestPurgeEvery(t *testing.T) {
	for _, c := range []struct{ keep, want time.Duration }{
		{30 * 24 * time.Hour, time.Hour},
		{2 * time.Hour, 30 * time.Minute},
		{5 * time.Second, 1250 * time.Millisecond},
		{time.Second, time.Second},
		{time.Millisecond, time.Second},
	} {
		if got := PurgeEvery(c.keep); got != c.want {
			t.Errorf("PurgeEvery(%s) = %s, want %s", c.keep, got, c.want)
		}
	}
}

// purgeStore records the cut-offs it is asked to purge before.
type purgeStore struct {
	mu     sync.Mutex
	before []time.Time
	err    error
}

func (s *purgeStore) PurgeLedgers(_ context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = append(s.before, before)
	return 1, s.err
}

func (s *purgeStore) calls() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.before...)
}

// TestRetention: a purge deletes what is older than the retention; Run
// purges at once and again at its interval, until its context ends; a
// store's failure does not stop it.
func TestRetention(t *testing.T) {
	st := &purgeStore{}
	r := NewRetention(st, time.Hour, nil)
	began := time.Now()
	r.Purge(context.Background())
	got := st.calls()
	if len(got) != 1 || got[0].Before(began.Add(-time.Hour)) || got[0].After(time.Now().Add(-time.Hour)) {
		t.Fatalf("a purge with an hour's retention cut at %v (now %v)", got, began)
	}

	st = &purgeStore{err: errors.New("disk I/O error")}
	r = NewRetention(st, 4*time.Second, nil) // purged every second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(st.calls()) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	if n := len(st.calls()); n < 2 {
		t.Errorf("Run purged %d times in 10s with a purge every second", n)
	}
}
