package controller

import (
	"context"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/ledger"
)

// ledgerExec wraps an exec's emit (a plain exec's or a session command's)
// to see its end event, and returns the function that records the command
// once it is over.
func (c *Controller) ledgerExec(ctx context.Context, sandboxID string, l *ledger.Command, emit Emit) (Emit, func()) {
	var end *api.ExecEvent
	wrapped := func(ev api.ExecEvent) error {
		if ev.Type == api.EventEnd {
			e := ev
			end = &e
		}
		return emit(ev)
	}
	return wrapped, func() {
		_ = c.Record(ctx, sandboxID, l.Entry(execEnd(end)))
	}
}

// execEnd reads an exec stream's end event (nil: none was sent).
func execEnd(end *api.ExecEvent) *ledger.End {
	switch {
	case end == nil:
		return &ledger.End{Note: "no end: the caller went away or the command did not start; a running command was killed"}
	case end.Error != nil:
		return &ledger.End{Note: "exec failed, exit status unknown: " + end.Error.Message}
	}
	out := &ledger.End{ExitCode: end.ExitCode, Signal: end.Signal, TimedOut: end.TimedOut}
	if end.SessionRestarted {
		out.Data = map[string]string{"session_restarted": "true"}
	}
	return out
}
