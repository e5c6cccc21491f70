package oci

import (
	"context"
	"log/slog"
	"time"
)

// stepTimer records how long each step of a start or teardown took, so a
// slow create can be explained from the daemon's debug log alone.
type stepTimer struct {
	last  time.Time
	start time.Time
	attrs []any
}

func newStepTimer() *stepTimer {
	now := time.Now()
	return &stepTimer{last: now, start: now}
}

// mark closes the step that ran since the previous mark.
func (t *stepTimer) mark(name string) {
	now := time.Now()
	t.attrs = append(t.attrs, slog.Duration(name, now.Sub(t.last)))
	t.last = now
}

func (t *stepTimer) log(log *slog.Logger, msg string) {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	log.Debug(msg, append(t.attrs, slog.Duration("total", time.Since(t.start)))...)
}
