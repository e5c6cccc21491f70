package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

var _ store.SecretStore = (*Store)(nil)

var secretNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func checkSecretName(name string) error {
	if !secretNameRE.MatchString(name) {
		return errdefs.Invalid("secret name %q is not valid", name)
	}
	return nil
}

// PutSecret creates or replaces a sealed secret.
func (st *Store) PutSecret(ctx context.Context, s *store.Secret) (bool, error) {
	if err := checkSecretName(s.Name); err != nil {
		return false, err
	}
	if len(s.Sealed) < 29 || len(s.Sealed) > 70000 {
		return false, errdefs.Invalid("sealed secret of %d bytes is out of bounds", len(s.Sealed))
	}
	t := now()
	var created bool
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM secrets WHERE name = ?`, s.Name).Scan(&n); err != nil {
			return fmt.Errorf("store: put secret %q: %w", s.Name, ctxErr(ctx, err))
		}
		created = n == 0
		_, err := tx.ExecContext(ctx,
			`INSERT INTO secrets (name, sealed, created_at, updated_at) VALUES (?, ?, ?, ?)
			 ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
			s.Name, s.Sealed, nanos(t), nanos(t))
		if err != nil {
			return fmt.Errorf("store: put secret %q: %w", s.Name, ctxErr(ctx, err))
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	s.UpdatedAt = t
	if created {
		s.CreatedAt = t
	}
	return created, nil
}

func scanSecret(sc scanner) (*store.Secret, error) {
	var (
		s                store.Secret
		created, updated sql.NullInt64
	)
	if err := sc.Scan(&s.Name, &s.Sealed, &created, &updated); err != nil {
		return nil, err
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &s, nil
}

// GetSecret finds one secret.
func (st *Store) GetSecret(ctx context.Context, name string) (*store.Secret, error) {
	if err := checkSecretName(name); err != nil {
		return nil, err
	}
	s, err := scanSecret(st.r.QueryRowContext(ctx,
		`SELECT name, sealed, created_at, updated_at FROM secrets WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("secret %q does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get secret: %w", ctxErr(ctx, err))
	}
	return s, nil
}

// ListSecrets lists every secret by name.
func (st *Store) ListSecrets(ctx context.Context) ([]*store.Secret, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT name, sealed, created_at, updated_at FROM secrets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list secrets: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Secret
	for rows.Next() {
		s, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list secrets: %w", ctxErr(ctx, err))
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list secrets: %w", ctxErr(ctx, err))
	}
	return out, nil
}

// DeleteSecret removes one secret.
func (st *Store) DeleteSecret(ctx context.Context, name string) error {
	if err := checkSecretName(name); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("store: delete secret: %w", ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("secret %q does not exist", name)
		}
		return nil
	})
}
