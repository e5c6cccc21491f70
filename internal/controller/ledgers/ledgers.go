// Package ledgers serves sandboxes' ledgers to their callers: a page of a
// ledger (a live sandbox's, or a destroyed one's for the retention period)
// and the entries callers add of their own (a payment made, a message
// sent). The entries the daemon makes are written by internal/ledger's
// Recorder; when a destroyed sandbox's ledger goes is internal/ledger's
// Retention.
package ledgers

import (
	"context"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/store"
)

// Bounds on a page and on what a caller may add.
const (
	maxData     = 32
	defaultPage = 1000
	maxPage     = 5000
)

var (
	kindRE    = lazyre.New(`^[a-z][a-z0-9_.-]{0,63}$`)
	dataKeyRE = lazyre.New(`^[A-Za-z0-9_.-]{1,64}$`)
)

// Core is what the subsystem uses of the controller.
type Core interface {
	// RecordedSandbox finds the sandbox ref names that ctx's caller may
	// see: a live one first, then a destroyed one whose ledger is kept.
	RecordedSandbox(ctx context.Context, ref string) (id, name string, err error)
}

var _ Core = (*controller.Controller)(nil)

// Store keeps the entries.
type Store interface {
	AppendLedger(ctx context.Context, e *store.LedgerEntry) error
	Ledger(ctx context.Context, sandboxID string, after int64, limit int) ([]store.LedgerEntry, error)
}

// Options configures the subsystem.
type Options struct {
	Core  Core
	Store Store
}

// Service reads ledgers and adds callers' entries.
type Service struct {
	core  Core
	store Store
}

// New returns the subsystem.
func New(o Options) *Service {
	return &Service{core: o.Core, store: o.Store}
}

// Page returns one page of a sandbox's ledger, entries after seq after,
// oldest first (limit 0: the default page). Another owner's sandbox is
// not found.
func (s *Service) Page(ctx context.Context, ref string, after int64, limit int) (*api.Ledger, error) {
	if after < 0 {
		return nil, errdefs.Invalid("after must not be negative")
	}
	switch {
	case limit == 0:
		limit = defaultPage
	case limit < 0 || limit > maxPage:
		return nil, errdefs.Invalid("limit %d: want 1 to %d", limit, maxPage)
	}
	id, _, err := s.core.RecordedSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	// One more than asked tells whether there is a next page.
	entries, err := s.store.Ledger(ctx, id, after, limit+1)
	if err != nil {
		return nil, err
	}
	out := &api.Ledger{SandboxID: id, Entries: make([]api.LedgerEntry, 0, len(entries))}
	if len(entries) > limit {
		entries = entries[:limit]
		out.Next = entries[limit-1].Seq
	}
	for _, e := range entries {
		out.Entries = append(out.Entries, toAPI(e))
	}
	return out, nil
}

// Add appends a caller's record of a side effect outside the sandbox to
// its ledger. Kinds the daemon records are refused.
func (s *Service) Add(ctx context.Context, ref string, req api.AddLedgerEntryRequest) (*api.LedgerEntry, error) {
	if err := validateAdd(req); err != nil {
		return nil, err
	}
	id, name, err := s.core.RecordedSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	se := &store.LedgerEntry{
		SandboxID: id, SandboxName: name, Kind: req.Kind, Source: store.SourceCaller,
		Note: req.Note, Data: maps.Clone(req.Data),
	}
	if err := s.store.AppendLedger(context.WithoutCancel(ctx), se); err != nil {
		return nil, err
	}
	e := toAPI(*se)
	return &e, nil
}

func toAPI(e store.LedgerEntry) api.LedgerEntry {
	return api.LedgerEntry{
		Seq:        e.Seq,
		SandboxID:  e.SandboxID,
		Kind:       e.Kind,
		Source:     e.Source,
		At:         e.At,
		Command:    e.Command,
		ExitCode:   e.ExitCode,
		DurationMS: e.Duration.Milliseconds(),
		Path:       e.Path,
		Note:       e.Note,
		Data:       e.Data,
	}
}

func validateAdd(req api.AddLedgerEntryRequest) error {
	if !kindRE.MatchString(req.Kind) {
		return errdefs.Invalid("kind %q: use 1-64 lowercase letters, digits, '_', '.' or '-', starting with a letter", rules.Truncate(req.Kind, 80))
	}
	if ledger.IsDaemonKind(req.Kind) {
		return errdefs.Invalid("kind %q is recorded by paddock itself; name your own kind (for example payment.sent)", req.Kind)
	}
	if len(req.Note) > ledger.MaxNote || !utf8.ValidString(req.Note) || containsNUL(req.Note) {
		return errdefs.Invalid("note must be valid UTF-8 without NUL, at most %d bytes", ledger.MaxNote)
	}
	if len(req.Data) > maxData {
		return errdefs.Invalid("data has %d entries, at most %d", len(req.Data), maxData)
	}
	for _, k := range slices.Sorted(maps.Keys(req.Data)) {
		v := req.Data[k]
		if !dataKeyRE.MatchString(k) {
			return errdefs.Invalid("data key %q: use 1-64 letters, digits, '_', '.' or '-'", rules.Truncate(k, 80))
		}
		if len(v) > ledger.MaxDataValue || !utf8.ValidString(v) || containsNUL(v) {
			return errdefs.Invalid("data value of %q must be valid UTF-8 without NUL, at most %d bytes", k, ledger.MaxDataValue)
		}
	}
	return nil
}

func containsNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }
