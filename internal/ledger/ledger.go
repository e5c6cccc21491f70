// Package ledger holds the rules by which the daemon writes a sandbox's
// ledger (docs/ledger-backups.md): which kinds only the daemon records,
// how an entry's text is bounded and cleaned so the store takes it, and
// the Recorder that appends entries. It needs only the store, so a part
// made before the controller (the egress proxy, reporting refusals) writes
// through the same Recorder as the controller does.
package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// Timeout bounds one ledger write. Records are written after the work they
// describe, often when the request is gone, so they get their own deadline
// instead of the request's.
const Timeout = 10 * time.Second

// Bounds on an entry's text.
const (
	// MaxNote bounds a note.
	MaxNote = 4096
	// MaxDataValue bounds a value of a caller's data.
	MaxDataValue = 1024
	// MaxCommand bounds a command line (an exec may send 1 MiB of
	// arguments; its entry must still fit).
	MaxCommand = 64 << 10
)

// daemonKinds are recorded by paddock only, so a reader can trust that an
// "exec" entry is an exec that happened, not a caller's claim. It is
// api.PaddockLedgerKinds: Record refuses any other kind, so a kind the
// daemon records cannot be left out of the list callers are refused.
var daemonKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range api.PaddockLedgerKinds() {
		m[k] = true
	}
	return m
}()

// IsDaemonKind says whether only the daemon records entries of kind.
func IsDaemonKind(kind string) bool { return daemonKinds[kind] }

// Store is what the Recorder writes to.
type Store interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	AppendLedger(ctx context.Context, e *store.LedgerEntry) error
}

// Recorder appends the daemon's entries to sandboxes' ledgers.
type Recorder struct {
	st  Store
	log *slog.Logger
}

// NewRecorder returns a Recorder writing to st.
func NewRecorder(st Store, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{st: st, log: log}
}

// Record appends an entry the daemon made to a sandbox's ledger, under the
// sandbox's name when it still has a record. Features call it after the
// fact they record (a snapshot taken, a restore done, a connection
// refused). A failure is logged and returned, never fatal to the recorded
// work: the work has happened by then.
func (r *Recorder) Record(ctx context.Context, sandboxID string, e api.LedgerEntry) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
	defer cancel()
	var name string
	if rec, err := r.st.GetSandbox(ctx, sandboxID); err == nil {
		name = rec.Name
	}
	return r.RecordNamed(ctx, sandboxID, name, e)
}

// RecordNamed is Record when the caller knows the sandbox's name; ctx's
// deadline is the caller's to set.
func (r *Recorder) RecordNamed(ctx context.Context, sandboxID, name string, e api.LedgerEntry) error {
	if !daemonKinds[e.Kind] {
		// A programming error: the kind must be in api.PaddockLedgerKinds,
		// or a caller could forge entries of it.
		r.log.Error("ledger record refused: kind is not in api.PaddockLedgerKinds", "sandbox", sandboxID, "kind", e.Kind)
		return fmt.Errorf("ledger kind %q is not one paddock records: %w", e.Kind, errdefs.ErrInvalidArgument)
	}
	e = Storable(e)
	se := &store.LedgerEntry{
		SandboxID:   sandboxID,
		SandboxName: name,
		Kind:        e.Kind,
		Source:      store.SourcePaddock,
		Command:     e.Command,
		ExitCode:    e.ExitCode,
		Duration:    time.Duration(e.DurationMS) * time.Millisecond,
		Path:        e.Path,
		Note:        e.Note,
		Data:        e.Data,
	}
	if err := r.st.AppendLedger(ctx, se); err != nil {
		r.log.Warn("ledger record lost", "sandbox", sandboxID, "kind", e.Kind, "err", err)
		return err
	}
	return nil
}

// Storable bounds and cleans an entry's text (some of it comes from
// requests or from a sandbox) so the store accepts it.
func Storable(e api.LedgerEntry) api.LedgerEntry {
	e.Command, _ = BoundCommand(e.Command)
	e.Path = Text(e.Path, 4096)
	e.Note = Text(e.Note, MaxNote)
	if len(e.Data) > 0 {
		d := make(map[string]string, len(e.Data))
		for k, v := range e.Data {
			d[Text(k, 64)] = Text(v, MaxDataValue*16)
		}
		e.Data = d
	}
	return e
}

// BoundCommand keeps a command line within MaxCommand bytes, cutting the
// argument that crosses the bound and dropping the rest; it says whether
// it cut.
func BoundCommand(cmd []string) ([]string, bool) {
	if len(cmd) == 0 {
		return nil, false
	}
	out := make([]string, 0, len(cmd))
	n := 0
	for _, a := range cmd {
		a = Text(a, MaxCommand)
		if n+len(a) > MaxCommand {
			out = append(out, CutUTF8(a, MaxCommand-n)+"…")
			return out, true
		}
		n += len(a)
		out = append(out, a)
	}
	return out, false
}

// Text makes text from a request or from a sandbox storable: valid UTF-8
// without NUL bytes, at most max bytes.
func Text(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) > max {
		return CutUTF8(s, max-len("…")) + "…"
	}
	return s
}

// CutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a character.
func CutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
