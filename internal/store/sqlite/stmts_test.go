package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestPreparedWritesAtOpen checks every cached write statement is prepared
// by Open: preparing one inside a transaction would wait forever for the
// single writer connection that transaction holds.
func TestPreparedWritesAtOpen(t *testing.T) {
	s, _ := openTemp(t)
	for _, q := range writeQueries {
		if s.ws.lookup(q) == nil {
			t.Errorf("not prepared at Open: %.40s", q)
		}
	}
}

// TestPreparedStatementsConcurrent runs the cached statements from many
// goroutines at once, the way execs and state changes of many sandboxes
// do, and checks each write landed and nothing waits forever.
func TestPreparedStatementsConcurrent(t *testing.T) {
	s, _ := openTemp(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const workers, rounds = 8, 20
	for i := range workers {
		sb := &store.Sandbox{ID: fmt.Sprintf("sbcache%d", i), Name: fmt.Sprintf("n%d", i), State: api.StateCreating, CreatedAt: time.Now()}
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("sbcache%d", i)
			for r := range rounds {
				sb, err := s.GetSandbox(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				sb.ErrorReason = fmt.Sprintf("round %d", r)
				if err := s.UpdateSandbox(ctx, sb); err != nil {
					errs <- err
					return
				}
				if err := s.AppendStateChange(ctx, store.StateChange{SandboxID: id, From: api.StateCreating, To: api.StateRunning, Reason: "r"}); err != nil {
					errs <- err
					return
				}
				code := r
				if err := s.AppendLedger(ctx, &store.LedgerEntry{SandboxID: id, Kind: "exec", Source: store.SourcePaddock, Command: []string{"true"}, ExitCode: &code}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range workers {
		id := fmt.Sprintf("sbcache%d", i)
		sb, err := s.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("round %d", rounds-1); sb.ErrorReason != want {
			t.Errorf("%s: reason %q, want %q", id, sb.ErrorReason, want)
		}
		h, err := s.StateHistory(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != rounds {
			t.Errorf("%s: %d state changes, want %d", id, len(h), rounds)
		}
		l, err := s.Ledger(ctx, id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != rounds || *l[rounds-1].ExitCode != rounds-1 {
			t.Errorf("%s: %d ledger entries, want %d", id, len(l), rounds)
		}
	}
	// Closing releases the statements before the pools.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
