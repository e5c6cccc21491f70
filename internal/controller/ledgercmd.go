package controller

import (
	"context"

	"github.com/paddock-dev/paddock/internal/ledger"
)

// ledgerExec wraps an exec's emit to see its end event, and returns the
// function that records the command once it is over.
func (c *Controller) ledgerExec(ctx context.Context, sandboxID string, l *ledger.Command, emit Emit) (Emit, func()) {
	wrapped, end := ledger.WatchExec(emit)
	return wrapped, func() {
		_ = c.Record(ctx, sandboxID, l.Entry(ledger.ExecEnd(end())))
	}
}
