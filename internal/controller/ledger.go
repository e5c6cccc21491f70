package controller

import (
	"context"
	"errors"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/store"
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
	c.retained.Purge(ctx) // a ledger past its retention is gone on the dot, not at the next purge
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
