package controller

import (
	"context"
	"time"
)

// ledgerPurgeEvery is how often destroyed sandboxes' ledgers are purged:
// hourly, or four times per retention period when that is shorter (a
// retention of minutes is purged within a quarter of it).
func ledgerPurgeEvery(retention time.Duration) time.Duration {
	return min(purgeInterval, max(retention/4, time.Second))
}

// purgeLedgers deletes the ledgers of destroyed sandboxes whose newest
// entry is older than the retention.
func (c *Controller) purgeLedgers(ctx context.Context) {
	n, err := c.opts.Store.PurgeLedgers(ctx, time.Now().Add(-c.cfg.LedgerRetention))
	if err != nil {
		c.log.Warn("ledger retention", "err", err)
	} else if n > 0 {
		c.log.Info("ledger retention: deleted entries of destroyed sandboxes", "entries", n, "retention", c.cfg.LedgerRetention)
	}
}
