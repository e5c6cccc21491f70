package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

var _ store.PreviewStore = (*Store)(nil)

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return errdefs.Invalid("port %d is out of range 1-65535", port)
	}
	return nil
}

// PutPreview inserts or replaces the preview of p.Port.
func (st *Store) PutPreview(ctx context.Context, p *store.Preview) error {
	if err := checkID("sandbox id", p.SandboxID); err != nil {
		return err
	}
	if err := checkPort(p.Port); err != nil {
		return err
	}
	if len(p.TokenHash) != 32 {
		return errdefs.Invalid("token hash must be 32 bytes")
	}
	created := p.CreatedAt
	if created.IsZero() {
		created = now()
	}
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		if err := sandboxExists(ctx, tx, p.SandboxID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx,
			`INSERT INTO previews (sandbox_id, port, token_hash, created_at) VALUES (?, ?, ?, ?)
			 ON CONFLICT (sandbox_id, port) DO UPDATE SET token_hash = excluded.token_hash, created_at = excluded.created_at`,
			p.SandboxID, p.Port, p.TokenHash, nanos(created))
		if err != nil {
			return fmt.Errorf("store: expose port %d of sandbox %q: %w", p.Port, p.SandboxID, ctxErr(ctx, err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.CreatedAt = created
	return nil
}

func scanPreview(sc scanner) (*store.Preview, error) {
	var (
		p       store.Preview
		created sql.NullInt64
	)
	if err := sc.Scan(&p.SandboxID, &p.Port, &p.TokenHash, &created); err != nil {
		return nil, err
	}
	p.CreatedAt = fromNanos(created)
	return &p, nil
}

// GetPreview finds one port's preview.
func (st *Store) GetPreview(ctx context.Context, sandboxID string, port int) (*store.Preview, error) {
	if err := checkID("sandbox id", sandboxID); err != nil {
		return nil, err
	}
	if err := checkPort(port); err != nil {
		return nil, err
	}
	row := st.r.QueryRowContext(ctx,
		`SELECT sandbox_id, port, token_hash, created_at FROM previews WHERE sandbox_id = ? AND port = ?`, sandboxID, port)
	p, err := scanPreview(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("port %d of sandbox %q is not exposed", port, sandboxID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get preview: %w", ctxErr(ctx, err))
	}
	return p, nil
}

// ListPreviews lists a sandbox's previews by port.
func (st *Store) ListPreviews(ctx context.Context, sandboxID string) ([]*store.Preview, error) {
	if err := checkID("sandbox id", sandboxID); err != nil {
		return nil, err
	}
	rows, err := st.r.QueryContext(ctx,
		`SELECT sandbox_id, port, token_hash, created_at FROM previews WHERE sandbox_id = ? ORDER BY port`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("store: list previews: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Preview
	for rows.Next() {
		p, err := scanPreview(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list previews: %w", ctxErr(ctx, err))
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list previews: %w", ctxErr(ctx, err))
	}
	return out, nil
}

// DeletePreview revokes one port's token.
func (st *Store) DeletePreview(ctx context.Context, sandboxID string, port int) error {
	if err := checkID("sandbox id", sandboxID); err != nil {
		return err
	}
	if err := checkPort(port); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM previews WHERE sandbox_id = ? AND port = ?`, sandboxID, port)
		if err != nil {
			return fmt.Errorf("store: unexpose: %w", ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("port %d of sandbox %q is not exposed", port, sandboxID)
		}
		return nil
	})
}
