package controller

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/ledger"
)

// Bounds on what a command's entry carries, so that one huge command line
// (an exec may send 1 MiB of arguments) still fits one ledger entry.
const (
	maxLedgerEnvNames  = 4 << 10
	maxLedgerCodeStart = 256
	maxLedgerText      = 1 << 10
)

// cmdLedger is what the ledger says about one command, however it ran: a
// plain exec, a session command, a background process, a terminal, code in
// a context. The argv is recorded as given (it is the caller's own words);
// of the environment only the names are recorded, never the values, since
// they often carry secrets. Stdin is never recorded.
type cmdLedger struct {
	kind      string
	cmd       []string
	user, cwd string
	env       map[string]string
	// data identifies the run: its session, process, terminal, context.
	data  map[string]string
	start time.Time
}

func newCmdLedger(kind string, cmd []string) *cmdLedger {
	return &cmdLedger{kind: kind, cmd: cmd, data: map[string]string{}, start: time.Now()}
}

// cmdEnd is how a command ended, as far as the daemon knows. With no exit
// code, note says why the outcome is unknown.
type cmdEnd struct {
	exitCode *int
	signal   string
	timedOut bool
	// duration is how long it ran; 0 measures from the record's start.
	duration time.Duration
	note     string
	data     map[string]string
}

// entry is the ledger entry of the command: its start when end is nil,
// else its end.
func (l *cmdLedger) entry(end *cmdEnd) api.LedgerEntry {
	e := api.LedgerEntry{Kind: l.kind, Data: map[string]string{}}
	var truncated bool
	e.Command, truncated = ledger.BoundCommand(l.cmd)
	if truncated {
		n := 0
		for _, a := range l.cmd {
			n += len(a)
		}
		e.Data["command_bytes"] = strconv.Itoa(n)
	}
	for k, v := range l.data {
		e.Data[k] = ledger.Text(v, maxLedgerText)
	}
	if l.user != "" {
		e.Data["user"] = ledger.Text(l.user, maxLedgerText)
	}
	if l.cwd != "" {
		e.Data["cwd"] = ledger.Text(l.cwd, 4096)
	}
	if names := envNames(l.env); names != "" {
		e.Data["env"] = names
	}
	if end == nil {
		return e
	}
	e.DurationMS = end.duration.Milliseconds()
	if end.duration == 0 {
		e.DurationMS = time.Since(l.start).Milliseconds()
	}
	e.ExitCode = end.exitCode
	if end.signal != "" {
		e.Data["signal"] = ledger.Text(end.signal, 64)
	}
	if end.timedOut {
		e.Data["timed_out"] = "true"
	}
	for k, v := range end.data {
		e.Data[k] = ledger.Text(v, maxLedgerText)
	}
	e.Note = ledger.Text(end.note, ledger.MaxNote)
	return e
}

// envNames lists an environment's names, sorted, comma-separated, bounded:
// names past the bound are counted instead.
func envNames(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	var b strings.Builder
	names := slices.Sorted(maps.Keys(env))
	for i, k := range names {
		k = ledger.Text(k, maxLedgerText)
		if b.Len()+len(k)+1 > maxLedgerEnvNames {
			b.WriteString(",… " + strconv.Itoa(len(names)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
	}
	return b.String()
}

// ledgerExec wraps an exec's emit (a plain exec's or a session command's)
// to see its end event, and returns the function that records the command
// once it is over.
func (c *Controller) ledgerExec(ctx context.Context, sandboxID string, l *cmdLedger, emit Emit) (Emit, func()) {
	var end *api.ExecEvent
	wrapped := func(ev api.ExecEvent) error {
		if ev.Type == api.EventEnd {
			e := ev
			end = &e
		}
		return emit(ev)
	}
	return wrapped, func() {
		_ = c.Record(ctx, sandboxID, l.entry(execEnd(end)))
	}
}

// execEnd reads an exec stream's end event (nil: none was sent).
func execEnd(end *api.ExecEvent) *cmdEnd {
	switch {
	case end == nil:
		return &cmdEnd{note: "no end: the caller went away or the command did not start; a running command was killed"}
	case end.Error != nil:
		return &cmdEnd{note: "exec failed, exit status unknown: " + end.Error.Message}
	}
	out := &cmdEnd{exitCode: end.ExitCode, signal: end.Signal, timedOut: end.TimedOut}
	if end.SessionRestarted {
		out.data = map[string]string{"session_restarted": "true"}
	}
	return out
}

// CommandEntry is the ledger entry of a command started without the
// controller (envd's process.Process/Start, relayed by the E2B data
// plane), in the same shape as the daemon's own: argv as given, env names
// and never their values.
func CommandEntry(kind string, cmd []string, user, cwd string, env, data map[string]string) api.LedgerEntry {
	l := newCmdLedger(kind, cmd)
	l.user, l.cwd, l.env = user, cwd, env
	maps.Copy(l.data, data)
	return l.entry(nil)
}
