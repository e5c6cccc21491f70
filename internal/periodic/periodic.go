// Package periodic runs the daemon's background passes (retention,
// expiry): one pass at once, which also clears what a previous run left,
// then one per interval until the context ends. A pass is never run twice
// at the same time, and a slow pass delays the next rather than piling up.
package periodic

import (
	"context"
	"time"
)

// Run calls pass now and then every interval until ctx ends. pass gets
// ctx and reports its own failures: the next pass tries again.
func Run(ctx context.Context, interval time.Duration, pass func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
