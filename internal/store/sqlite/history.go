package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// AppendStateChange records one transition of an existing sandbox.
func (st *Store) AppendStateChange(ctx context.Context, c store.StateChange) error {
	if err := validateStateChange(c); err != nil {
		return err
	}
	if c.At.IsZero() {
		c.At = now()
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		if err := sandboxExists(ctx, tx, c.SandboxID); err != nil {
			return err
		}
		_, err := st.txExec(ctx, tx, qInsertStateChange,
			c.SandboxID, c.From, c.To, c.Reason, nanos(c.At))
		if err != nil {
			return fmt.Errorf("store: record state change of sandbox %q: %w", c.SandboxID, ctxErr(ctx, err))
		}
		return nil
	})
}

// StateHistory lists a sandbox's transitions, oldest first; transitions
// recorded at the same instant keep the order they were appended in.
func (st *Store) StateHistory(ctx context.Context, sandboxID string) ([]store.StateChange, error) {
	if err := checkID("sandbox id", sandboxID); err != nil {
		return nil, err
	}
	// One read transaction, so the existence check and the list see the
	// same snapshot.
	tx, err := st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: state history of sandbox %q: %w", sandboxID, ctxErr(ctx, err))
	}
	defer tx.Rollback()
	if err := sandboxExists(ctx, tx, sandboxID); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx,
		`SELECT sandbox_id, from_state, to_state, reason, at FROM sandbox_state_changes
		WHERE sandbox_id = ? ORDER BY at, seq`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("store: state history of sandbox %q: %w", sandboxID, ctxErr(ctx, err))
	}
	defer rows.Close()
	out := []store.StateChange{}
	for rows.Next() {
		var (
			c  store.StateChange
			at sql.NullInt64
		)
		if err := rows.Scan(&c.SandboxID, &c.From, &c.To, &c.Reason, &at); err != nil {
			return nil, fmt.Errorf("store: state history of sandbox %q: %w", sandboxID, err)
		}
		c.At = fromNanos(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: state history of sandbox %q: %w", sandboxID, ctxErr(ctx, err))
	}
	return out, nil
}

func sandboxExists(ctx context.Context, tx *sql.Tx, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM sandboxes WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return errdefs.NotFound("sandbox %q", id)
	}
	if err != nil {
		return fmt.Errorf("store: look up sandbox %q: %w", id, ctxErr(ctx, err))
	}
	return nil
}
