package controller

import (
	"context"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// recordTerminalOpen writes a terminal's terminal_open entry and returns
// the record its end is written from. The TERM the daemon sets is not the
// caller's and is left out of the env names. asked is when the agent was
// asked to start the process: its duration counts from there.
func (c *Controller) recordTerminalOpen(ctx context.Context, t *terminal, o TerminalOptions, asked time.Time) *cmdLedger {
	l := newCmdLedger(api.LedgerTerminalOpen, o.Cmd)
	l.start = asked
	l.user, l.cwd, l.env = o.User, o.Cwd, o.Env
	l.data["terminal"] = t.id
	l.data["pid"] = strconv.FormatUint(uint64(t.pid), 10)
	_ = c.Record(ctx, t.sandbox, l.entry(nil))
	end := *l
	end.kind, end.env = api.LedgerTerminalEnd, nil
	return &end
}

// adoptedTerminalLedger is the end record of a running terminal a daemon
// adopted after its restart: it ran since the terminal's creation.
func adoptedTerminalLedger(t *terminal) *cmdLedger {
	l := newCmdLedger(api.LedgerTerminalEnd, t.cmd)
	l.data["terminal"] = t.id
	l.data["pid"] = strconv.FormatUint(uint64(t.pid), 10)
	l.start = t.created
	return l
}

// recordTerminalEnd writes a terminal's terminal_end entry once its
// process ended or its stream broke; not when the daemon's own shutdown
// cut the stream (the next daemon adopts the terminal).
func (c *Controller) recordTerminalEnd(t *terminal) {
	if t.ledger == nil || c.closed() {
		return
	}
	t.mu.Lock()
	code, sig, failure := t.exitCode, t.signal, t.failure
	t.mu.Unlock()
	end := &cmdEnd{signal: sig}
	if failure != "" {
		end.note = "end unknown: " + failure
	} else {
		end.exitCode = &code
	}
	_ = c.Record(System(context.Background()), t.sandbox, t.ledger.entry(end))
}
