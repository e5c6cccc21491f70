package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/store"
)

// Bounds on ledger entries. The controller validates callers' input more
// tightly; these keep a bug upstream from growing the file without limit.
const (
	maxLedgerKind    = 64
	maxLedgerNote    = 16 << 10
	maxLedgerPath    = 4096
	maxLedgerCommand = 256 << 10
	maxLedgerPage    = 10000
)

var ledgerKindRE = lazyre.New(`^[a-z][a-z0-9_.-]*$`)

func validateLedgerEntry(e *store.LedgerEntry) error {
	if e == nil {
		return errdefs.Invalid("ledger entry is nil")
	}
	if err := checkID("sandbox id", e.SandboxID); err != nil {
		return err
	}
	if err := checkText("sandbox name", e.SandboxName, maxNameLen); err != nil {
		return err
	}
	if len(e.Kind) > maxLedgerKind || !ledgerKindRE.MatchString(e.Kind) {
		return errdefs.Invalid("ledger kind %q: want lowercase letters, digits, '_', '.', '-', at most %d bytes", truncate(e.Kind), maxLedgerKind)
	}
	if e.Source != store.SourcePaddock && e.Source != store.SourceCaller {
		return errdefs.Invalid("ledger source %q is not known", truncate(e.Source))
	}
	n := 0
	for _, a := range e.Command {
		if err := checkText("command argument", a, maxLedgerCommand); err != nil {
			return err
		}
		n += len(a)
	}
	if n > maxLedgerCommand {
		return errdefs.Invalid("command is larger than %d bytes", maxLedgerCommand)
	}
	if e.Duration < 0 {
		return errdefs.Invalid("duration must not be negative")
	}
	if err := checkText("path", e.Path, maxLedgerPath); err != nil {
		return err
	}
	if err := checkText("note", e.Note, maxLedgerNote); err != nil {
		return err
	}
	if err := checkMap("data", e.Data); err != nil {
		return err
	}
	return checkTime("at", e.At)
}

// AppendLedger stores one entry.
func (st *Store) AppendLedger(ctx context.Context, e *store.LedgerEntry) error {
	if err := validateLedgerEntry(e); err != nil {
		return err
	}
	if e.At.IsZero() {
		e.At = now()
	}
	cmd, err := json.Marshal(e.Command)
	if err != nil {
		return errdefs.Invalid("command cannot be encoded")
	}
	data, err := json.Marshal(e.Data)
	if err != nil {
		return errdefs.Invalid("data cannot be encoded")
	}
	var code sql.NullInt64
	if e.ExitCode != nil {
		code = sql.NullInt64{Int64: int64(*e.ExitCode), Valid: true}
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := st.txExec(ctx, tx, qInsertLedgerEntry,
			e.SandboxID, e.SandboxName, e.Kind, e.Source, e.At.UnixNano(), string(cmd), code,
			int64(e.Duration), e.Path, e.Note, string(data))
		if err != nil {
			return fmt.Errorf("store: append to the ledger of sandbox %q: %w", e.SandboxID, ctxErr(ctx, err))
		}
		e.Seq, err = res.LastInsertId()
		return err
	})
}

// Ledger lists one page of a sandbox's ledger.
func (st *Store) Ledger(ctx context.Context, sandboxID string, after int64, limit int) ([]store.LedgerEntry, error) {
	if err := checkID("sandbox id", sandboxID); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > maxLedgerPage {
		return nil, errdefs.Invalid("ledger page size %d: want 1 to %d", limit, maxLedgerPage)
	}
	rows, err := st.r.QueryContext(ctx,
		`SELECT seq, sandbox_id, sandbox_name, kind, source, at, command, exit_code, duration_ns, path, note, data
		FROM ledger WHERE sandbox_id = ? AND seq > ? ORDER BY seq LIMIT ?`, sandboxID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: ledger of sandbox %q: %w", sandboxID, ctxErr(ctx, err))
	}
	defer rows.Close()
	out := []store.LedgerEntry{}
	for rows.Next() {
		var (
			e         store.LedgerEntry
			at, dur   int64
			cmd, data string
			code      sql.NullInt64
		)
		if err := rows.Scan(&e.Seq, &e.SandboxID, &e.SandboxName, &e.Kind, &e.Source, &at, &cmd, &code, &dur, &e.Path, &e.Note, &data); err != nil {
			return nil, fmt.Errorf("store: ledger of sandbox %q: %w", sandboxID, err)
		}
		e.At = time.Unix(0, at).UTC()
		e.Duration = time.Duration(dur)
		if code.Valid {
			c := int(code.Int64)
			e.ExitCode = &c
		}
		if err := json.Unmarshal([]byte(cmd), &e.Command); err != nil {
			return nil, fmt.Errorf("store: ledger entry %d: decode command: %w", e.Seq, err)
		}
		if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
			return nil, fmt.Errorf("store: ledger entry %d: decode data: %w", e.Seq, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: ledger of sandbox %q: %w", sandboxID, ctxErr(ctx, err))
	}
	return out, nil
}

// LedgerSandboxes finds whose ledgers ref may name: an id first, then the
// sandboxes that used it as a name, newest first.
func (st *Store) LedgerSandboxes(ctx context.Context, ref string) ([]string, error) {
	if err := checkID("sandbox id or name", ref); err != nil {
		return nil, err
	}
	var out []string
	var id string
	err := st.r.QueryRowContext(ctx,
		`SELECT sandbox_id FROM ledger WHERE sandbox_id = ? LIMIT 1`, ref).Scan(&id)
	switch {
	case err == nil:
		out = append(out, id)
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: find the ledger of %q: %w", ref, ctxErr(ctx, err))
	}
	rows, err := st.r.QueryContext(ctx,
		`SELECT sandbox_id FROM ledger WHERE sandbox_name = ? GROUP BY sandbox_id ORDER BY max(seq) DESC LIMIT ?`,
		ref, store.MaxLedgerNameMatches)
	if err != nil {
		return nil, fmt.Errorf("store: find the ledgers named %q: %w", ref, ctxErr(ctx, err))
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: find the ledgers named %q: %w", ref, err)
		}
		if len(out) == 0 || id != out[0] {
			out = append(out, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: find the ledgers named %q: %w", ref, ctxErr(ctx, err))
	}
	if len(out) == 0 {
		return nil, errdefs.NotFound("no ledger for sandbox %q", ref)
	}
	return out, nil
}

// PurgeLedgers deletes expired ledgers of sandboxes that are gone.
func (st *Store) PurgeLedgers(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ledger WHERE sandbox_id IN (
			SELECT l.sandbox_id FROM ledger l LEFT JOIN sandboxes s ON s.id = l.sandbox_id
			WHERE s.id IS NULL OR s.state = 'destroyed'
			GROUP BY l.sandbox_id HAVING max(l.at) < ?)`, before.UnixNano())
		if err != nil {
			return fmt.Errorf("store: purge ledgers: %w", ctxErr(ctx, err))
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
