package terminals

import (
	"context"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/ledger"
)

// recordOpen writes a terminal's terminal_open entry and returns
// the record its end is written from. The TERM the daemon sets is not the
// caller's and is left out of the env names. asked is when the agent was
// asked to start the process: its duration counts from there.
func (s *Service) recordOpen(ctx context.Context, t *terminal, o Options, asked time.Time) *ledger.Command {
	l := ledger.NewCommand(api.LedgerTerminalOpen, o.Cmd)
	l.Start = asked
	l.User, l.Cwd, l.Env = o.User, o.Cwd, o.Env
	l.Data["terminal"] = t.id
	l.Data["pid"] = strconv.FormatUint(uint64(t.pid), 10)
	_ = s.core.Record(ctx, t.sandbox, l.Entry(nil))
	end := *l
	end.Kind, end.Env = api.LedgerTerminalEnd, nil
	return &end
}

// adoptedTerminalLedger is the end record of a running terminal a daemon
// adopted after its restart: it ran since the terminal's creation.
func adoptedTerminalLedger(t *terminal) *ledger.Command {
	l := ledger.NewCommand(api.LedgerTerminalEnd, t.cmd)
	l.Data["terminal"] = t.id
	l.Data["pid"] = strconv.FormatUint(uint64(t.pid), 10)
	l.Start = t.created
	return l
}

// recordEnd writes a terminal's terminal_end entry once its
// process ended or its stream broke; not when the daemon's own shutdown
// cut the stream (the next daemon adopts the terminal).
func (s *Service) recordEnd(t *terminal) {
	if t.ledger == nil || s.core.Closed() {
		return
	}
	t.mu.Lock()
	code, sig, failure := t.exitCode, t.signal, t.failure
	t.mu.Unlock()
	end := &ledger.End{Signal: sig}
	if failure != "" {
		end.Note = "end unknown: " + failure
	} else {
		end.ExitCode = &code
	}
	ctx, cancel := s.core.UntilClose()
	defer cancel()
	_ = s.core.Record(ctx, t.sandbox, t.ledger.Entry(end))
}
