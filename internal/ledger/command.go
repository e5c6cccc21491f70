package ledger

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// Bounds on what a command's entry carries, so that one huge command line
// (an exec may send 1 MiB of arguments) still fits one ledger entry.
const (
	maxEnvNames = 4 << 10
	maxText     = 1 << 10
)

// Command is what the ledger says about one command, however it ran: a
// plain exec, a session command, a background process, a terminal, code in
// a context. The argv is recorded as given (it is the caller's own words);
// of the environment only the names are recorded, never the values, since
// they often carry secrets. Stdin is never recorded.
type Command struct {
	Kind      string
	Cmd       []string
	User, Cwd string
	Env       map[string]string
	// Data identifies the run: its session, process, terminal, context.
	Data  map[string]string
	Start time.Time
}

// NewCommand starts the record of a command of kind, now.
func NewCommand(kind string, cmd []string) *Command {
	return &Command{Kind: kind, Cmd: cmd, Data: map[string]string{}, Start: time.Now()}
}

// End is how a command ended, as far as the daemon knows. With no exit
// code, Note says why the outcome is unknown.
type End struct {
	ExitCode *int
	Signal   string
	TimedOut bool
	// Duration is how long it ran; 0 measures from the record's start.
	Duration time.Duration
	Note     string
	Data     map[string]string
}

// Entry is the ledger entry of the command: its start when end is nil,
// else its end.
func (l *Command) Entry(end *End) api.LedgerEntry {
	e := api.LedgerEntry{Kind: l.Kind, Data: map[string]string{}}
	var truncated bool
	e.Command, truncated = BoundCommand(l.Cmd)
	if truncated {
		n := 0
		for _, a := range l.Cmd {
			n += len(a)
		}
		e.Data["command_bytes"] = strconv.Itoa(n)
	}
	for k, v := range l.Data {
		e.Data[k] = Text(v, maxText)
	}
	if l.User != "" {
		e.Data["user"] = Text(l.User, maxText)
	}
	if l.Cwd != "" {
		e.Data["cwd"] = Text(l.Cwd, 4096)
	}
	if names := envNames(l.Env); names != "" {
		e.Data["env"] = names
	}
	if end == nil {
		return e
	}
	e.DurationMS = end.Duration.Milliseconds()
	if end.Duration == 0 {
		e.DurationMS = time.Since(l.Start).Milliseconds()
	}
	e.ExitCode = end.ExitCode
	if end.Signal != "" {
		e.Data["signal"] = Text(end.Signal, 64)
	}
	if end.TimedOut {
		e.Data["timed_out"] = "true"
	}
	for k, v := range end.Data {
		e.Data[k] = Text(v, maxText)
	}
	e.Note = Text(end.Note, MaxNote)
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
		k = Text(k, maxText)
		if b.Len()+len(k)+1 > maxEnvNames {
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

// CommandEntry is the ledger entry of a command started without the
// controller (envd's process.Process/Start, relayed by the E2B data
// plane), in the same shape as the daemon's own: argv as given, env names
// and never their values.
func CommandEntry(kind string, cmd []string, user, cwd string, env, data map[string]string) api.LedgerEntry {
	l := NewCommand(kind, cmd)
	l.User, l.Cwd, l.Env = user, cwd, env
	maps.Copy(l.Data, data)
	return l.Entry(nil)
}

// WatchExec wraps an exec stream's emit (a plain exec's or a session
// command's) to keep its end event; end reads it once the stream is over
// (nil: none was sent, which ExecEnd records as such).
func WatchExec(emit func(api.ExecEvent) error) (wrapped func(api.ExecEvent) error, end func() *api.ExecEvent) {
	var last *api.ExecEvent
	wrapped = func(ev api.ExecEvent) error {
		if ev.Type == api.EventEnd {
			e := ev
			last = &e
		}
		return emit(ev)
	}
	return wrapped, func() *api.ExecEvent { return last }
}

// ExecEnd reads an exec stream's end event (nil: none was sent).
func ExecEnd(end *api.ExecEvent) *End {
	switch {
	case end == nil:
		return &End{Note: "no end: the caller went away or the command did not start; a running command was killed"}
	case end.Error != nil:
		return &End{Note: "exec failed, exit status unknown: " + end.Error.Message}
	}
	out := &End{ExitCode: end.ExitCode, Signal: end.Signal, TimedOut: end.TimedOut}
	if end.SessionRestarted {
		out.Data = map[string]string{"session_restarted": "true"}
	}
	return out
}
