package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/store"
)

// Bounds on what a caller may add to a ledger.
const (
	maxLedgerData     = 32
	defaultLedgerPage = 1000
	maxLedgerPage     = 5000
)

var (
	ledgerKindRE    = lazyre.New(`^[a-z][a-z0-9_.-]{0,63}$`)
	ledgerDataKeyRE = lazyre.New(`^[A-Za-z0-9_.-]{1,64}$`)
)

// Record appends an entry the daemon made to a sandbox's ledger
// (internal/ledger's Recorder, shared with the parts made before the
// controller). Features call it after the fact they record.
func (c *Controller) Record(ctx context.Context, sandboxID string, e api.LedgerEntry) error {
	return c.recorder.Record(ctx, sandboxID, e)
}

// record is Record under a name the caller knows, within ctx's deadline.
func (c *Controller) record(ctx context.Context, sandboxID, name string, e api.LedgerEntry) error {
	return c.recorder.RecordNamed(ctx, sandboxID, name, e)
}

// recordTransition turns lifecycle transitions into ledger entries.
func (c *Controller) recordTransition(ctx context.Context, rec *store.Sandbox, from, to, reason string) {
	var kind string
	switch {
	case to == api.StateRunning && from == api.StateCreating && reason == "created":
		kind = api.LedgerCreate
	case to == api.StateRunning && (from == api.StatePaused || from == api.StateHibernated):
		kind = api.LedgerResume
	case to == api.StateHibernated:
		kind = api.LedgerHibernate
	case to == api.StateRunning:
		kind = api.LedgerStart
	case to == api.StatePaused:
		kind = api.LedgerPause
	case to == api.StateStopped:
		kind = api.LedgerStop
	case to == api.StateDestroyed:
		kind = api.LedgerDestroy
	case to == api.StateError:
		kind = api.LedgerError
	default:
		return
	}
	e := api.LedgerEntry{Kind: kind, Note: reason}
	if kind == api.LedgerCreate {
		e.Data = map[string]string{"image": rec.Image, "image_digest": rec.ImageDigest, "runtime": rec.Runtime}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledger.Timeout)
	defer cancel()
	_ = c.record(ctx, rec.ID, rec.Name, e)
	if kind == api.LedgerCreate {
		c.recordRestore(ctx, rec) // restoreledger.go
	}
}

// ledgerTarget finds whose ledger ref names: a live sandbox first, then a
// destroyed one whose ledger is still kept. Either must be one ctx's
// caller may see: the ledger of another owner's sandbox is not found.
func (c *Controller) ledgerTarget(ctx context.Context, ref string) (id, name string, err error) {
	rec, err := c.resolve(ctx, ref)
	if err == nil {
		return rec.ID, rec.Name, nil
	}
	if !errors.Is(err, errdefs.ErrNotFound) {
		return "", "", err
	}
	c.purgeLedgers(ctx) // a ledger past its retention is gone on the dot, not at the next purge
	ids, lerr := c.opts.Store.LedgerSandboxes(ctx, ref)
	if lerr != nil {
		if errors.Is(lerr, errdefs.ErrNotFound) {
			return "", "", errdefs.NotFound("sandbox %q (and no ledger kept for it)", ref)
		}
		return "", "", lerr
	}
	// Names are per owner: the newest ledger under a name may be another
	// owner's sandbox; the caller's is the newest of those it sees.
	for _, id := range ids {
		owner := "" // a record gone with its sandbox: only callers who see all see its ledger
		name := ""
		if old, gerr := c.opts.Store.GetSandbox(ctx, id); gerr == nil {
			name, owner = old.Name, old.KeyID
		}
		if visible(ctx, owner) {
			return id, name, nil
		}
	}
	return "", "", errdefs.NotFound("sandbox %q (and no ledger kept for it)", ref)
}

// Ledger returns one page of a sandbox's ledger; it works after the sandbox
// is destroyed, for the retention period.
func (c *Controller) Ledger(ctx context.Context, ref string, after int64, limit int) (*api.Ledger, error) {
	if after < 0 {
		return nil, errdefs.Invalid("after must not be negative")
	}
	switch {
	case limit == 0:
		limit = defaultLedgerPage
	case limit < 0 || limit > maxLedgerPage:
		return nil, errdefs.Invalid("limit %d: want 1 to %d", limit, maxLedgerPage)
	}
	id, _, err := c.ledgerTarget(ctx, ref)
	if err != nil {
		return nil, err
	}
	// One more than asked tells whether there is a next page.
	entries, err := c.opts.Store.Ledger(ctx, id, after, limit+1)
	if err != nil {
		return nil, err
	}
	out := &api.Ledger{SandboxID: id, Entries: make([]api.LedgerEntry, 0, len(entries))}
	if len(entries) > limit {
		entries = entries[:limit]
		out.Next = entries[limit-1].Seq
	}
	for _, e := range entries {
		out.Entries = append(out.Entries, toAPILedger(e))
	}
	return out, nil
}

func toAPILedger(e store.LedgerEntry) api.LedgerEntry {
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

// AddLedgerEntry appends a caller's record of a side effect outside the
// sandbox (a payment made, a message sent) to its ledger.
func (c *Controller) AddLedgerEntry(ctx context.Context, ref string, req api.AddLedgerEntryRequest) (*api.LedgerEntry, error) {
	if err := validateLedgerAdd(req); err != nil {
		return nil, err
	}
	id, name, err := c.ledgerTarget(ctx, ref)
	if err != nil {
		return nil, err
	}
	se := &store.LedgerEntry{
		SandboxID: id, SandboxName: name, Kind: req.Kind, Source: store.SourceCaller,
		Note: req.Note, Data: maps.Clone(req.Data),
	}
	if err := c.opts.Store.AppendLedger(context.WithoutCancel(ctx), se); err != nil {
		return nil, err
	}
	e := toAPILedger(*se)
	return &e, nil
}

func validateLedgerAdd(req api.AddLedgerEntryRequest) error {
	if !ledgerKindRE.MatchString(req.Kind) {
		return errdefs.Invalid("kind %q: use 1-64 lowercase letters, digits, '_', '.' or '-', starting with a letter", req.Kind)
	}
	if ledger.IsDaemonKind(req.Kind) {
		return errdefs.Invalid("kind %q is recorded by paddock itself; name your own kind (for example payment.sent)", req.Kind)
	}
	if len(req.Note) > ledger.MaxNote || !utf8.ValidString(req.Note) || containsNUL(req.Note) {
		return errdefs.Invalid("note must be valid UTF-8 without NUL, at most %d bytes", ledger.MaxNote)
	}
	if len(req.Data) > maxLedgerData {
		return errdefs.Invalid("data has %d entries, at most %d", len(req.Data), maxLedgerData)
	}
	for _, k := range slices.Sorted(maps.Keys(req.Data)) {
		v := req.Data[k]
		if !ledgerDataKeyRE.MatchString(k) {
			return errdefs.Invalid("data key %q: use 1-64 letters, digits, '_', '.' or '-'", k)
		}
		if len(v) > ledger.MaxDataValue || !utf8.ValidString(v) || containsNUL(v) {
			return errdefs.Invalid("data value of %q must be valid UTF-8 without NUL, at most %d bytes", k, ledger.MaxDataValue)
		}
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// purgeInterval is how often retention runs; it also runs at start.
const purgeInterval = time.Hour

// RunRetention enforces the ledger's retention and forgets expired
// Idempotency-Key results, now and then every
// purgeInterval (the ledger's more often when its retention is shorter:
// ledgerretention.go), until ctx ends.
func (c *Controller) RunRetention(ctx context.Context) {
	t := time.NewTicker(purgeInterval)
	defer t.Stop()
	lt := time.NewTicker(ledgerPurgeEvery(c.cfg.LedgerRetention))
	defer lt.Stop()
	for {
		c.purgeOnce(ctx)
		for again := false; !again; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				again = true
			case <-lt.C:
				c.purgeLedgers(ctx)
			}
		}
	}
}

func (c *Controller) purgeOnce(ctx context.Context) {
	now := time.Now()
	c.purgeLedgers(ctx)
	if _, err := c.opts.Store.PurgeIdempotency(ctx, now); err != nil {
		c.log.Warn("idempotency key expiry", "err", err)
	}
}
