package ledger

import (
	"context"
	"log/slog"
	"time"

	"github.com/paddock-dev/paddock/internal/periodic"
)

// RetentionStore is what Retention deletes from.
type RetentionStore interface {
	// PurgeLedgers deletes the ledgers of destroyed sandboxes whose
	// newest entry is older than before, and says how many entries went.
	PurgeLedgers(ctx context.Context, before time.Time) (int64, error)
}

// Retention keeps a destroyed sandbox's ledger for a set time and then
// deletes it (a live sandbox's ledger is never purged). Run purges now and
// then; a reader of a destroyed sandbox's ledger purges first (Purge), so
// a ledger past its retention is gone on the dot, not at the next run.
type Retention struct {
	st   RetentionStore
	keep time.Duration
	log  *slog.Logger
}

// NewRetention returns a Retention keeping ledgers for keep.
func NewRetention(st RetentionStore, keep time.Duration, log *slog.Logger) *Retention {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Retention{st: st, keep: keep, log: log}
}

// Purge deletes the ledgers past their retention. A failure is logged:
// the next purge tries again.
func (r *Retention) Purge(ctx context.Context) {
	n, err := r.st.PurgeLedgers(ctx, time.Now().Add(-r.keep))
	if err != nil {
		r.log.Warn("ledger retention", "err", err)
	} else if n > 0 {
		r.log.Info("ledger retention: deleted entries of destroyed sandboxes", "entries", n, "retention", r.keep)
	}
}

// Run purges now and then every PurgeEvery(keep) until ctx ends.
func (r *Retention) Run(ctx context.Context) {
	periodic.Run(ctx, PurgeEvery(r.keep), r.Purge)
}

// PurgeEvery is how often ledgers kept for keep are purged: hourly, or
// four times per retention period when that is shorter (a retention of
// minutes is purged within a quarter of it), at most once a second.
func PurgeEvery(keep time.Duration) time.Duration {
	return min(time.Hour, max(keep/4, time.Second))
}
