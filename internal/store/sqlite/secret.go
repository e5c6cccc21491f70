package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/store"
)

var _ store.SecretStore = (*Store)(nil)

var secretNameRE = lazyre.New(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func checkSecretName(name string) error {
	if !secretNameRE.MatchString(name) {
		return errdefs.Invalid("secret name %q is not valid", name)
	}
	return nil
}

const secretColumns = `name, sealed, owner, created_at, updated_at`

// PutSecret creates a sealed secret, or replaces the value of the one of
// that name its owner keeps. Other owners' secrets of that name are
// neither read nor changed.
func (st *Store) PutSecret(ctx context.Context, s *store.Secret) (bool, error) {
	if err := checkSecretName(s.Name); err != nil {
		return false, err
	}
	if len(s.Sealed) < 29 || len(s.Sealed) > 70000 {
		return false, errdefs.Invalid("sealed secret of %d bytes is out of bounds", len(s.Sealed))
	}
	if err := checkText("secret owner", s.Owner, maxIDLen); err != nil {
		return false, err
	}
	t := now()
	var (
		created  bool
		firstSet sql.NullInt64
	)
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT created_at FROM secrets WHERE owner = ? AND name = ?`, s.Owner, s.Name).Scan(&firstSet)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created = true
			_, err = tx.ExecContext(ctx,
				`INSERT INTO secrets (`+secretColumns+`) VALUES (?, ?, ?, ?, ?)`,
				s.Name, s.Sealed, s.Owner, nanos(t), nanos(t))
		case err != nil:
		default:
			_, err = tx.ExecContext(ctx, `UPDATE secrets SET sealed = ?, updated_at = ? WHERE owner = ? AND name = ?`,
				s.Sealed, nanos(t), s.Owner, s.Name)
		}
		if err != nil {
			return fmt.Errorf("store: put secret %q: %w", s.Name, ctxErr(ctx, err))
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	s.UpdatedAt, s.CreatedAt = t, t
	if !created {
		s.CreatedAt = fromNanos(firstSet)
	}
	return created, nil
}

func scanSecret(sc scanner) (*store.Secret, error) {
	var (
		s                store.Secret
		created, updated sql.NullInt64
	)
	if err := sc.Scan(&s.Name, &s.Sealed, &s.Owner, &created, &updated); err != nil {
		return nil, err
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &s, nil
}

// GetSecret finds owner's secret of that name.
func (st *Store) GetSecret(ctx context.Context, owner, name string) (*store.Secret, error) {
	if err := checkSecretName(name); err != nil {
		return nil, err
	}
	s, err := scanSecret(st.r.QueryRowContext(ctx,
		`SELECT `+secretColumns+` FROM secrets WHERE owner = ? AND name = ?`, owner, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("secret %q does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get secret: %w", ctxErr(ctx, err))
	}
	return s, nil
}

// ListSecrets lists every owner's secrets by name, then owner.
func (st *Store) ListSecrets(ctx context.Context) ([]*store.Secret, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT `+secretColumns+` FROM secrets ORDER BY name, owner`)
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

// DeleteSecret removes owner's secret of that name.
func (st *Store) DeleteSecret(ctx context.Context, owner, name string) error {
	if err := checkSecretName(name); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE owner = ? AND name = ?`, owner, name)
		if err != nil {
			return fmt.Errorf("store: delete secret: %w", ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("secret %q does not exist", name)
		}
		return nil
	})
}
