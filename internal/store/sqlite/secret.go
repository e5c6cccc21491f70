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

// errSecretNameTaken is the conflict PutSecret returns for a name another
// owner holds. It says the name is taken and nothing about the holder.
func errSecretNameTaken(name string) error {
	return fmt.Errorf("secret name %q is taken: %w", name, errdefs.ErrConflict)
}

const secretColumns = `name, sealed, owner, created_at, updated_at`

// PutSecret creates a sealed secret, or replaces the value of one the
// same owner holds (any owner's with anyOwner). The owner check and the
// write are one transaction, so two owners setting one new name never
// both succeed.
func (st *Store) PutSecret(ctx context.Context, s *store.Secret, anyOwner bool) (bool, error) {
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
		created bool
		owner   = s.Owner
	)
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT owner FROM secrets WHERE name = ?`, s.Name).Scan(&owner)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created, owner = true, s.Owner
			_, err = tx.ExecContext(ctx,
				`INSERT INTO secrets (`+secretColumns+`) VALUES (?, ?, ?, ?, ?)`,
				s.Name, s.Sealed, s.Owner, nanos(t), nanos(t))
		case err != nil:
		case owner != s.Owner && !anyOwner:
			return errSecretNameTaken(s.Name)
		default:
			_, err = tx.ExecContext(ctx, `UPDATE secrets SET sealed = ?, updated_at = ? WHERE name = ?`, s.Sealed, nanos(t), s.Name)
		}
		if err != nil {
			return fmt.Errorf("store: put secret %q: %w", s.Name, ctxErr(ctx, err))
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	s.UpdatedAt, s.Owner = t, owner
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
	if err := sc.Scan(&s.Name, &s.Sealed, &s.Owner, &created, &updated); err != nil {
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
		`SELECT `+secretColumns+` FROM secrets WHERE name = ?`, name))
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
	rows, err := st.r.QueryContext(ctx, `SELECT `+secretColumns+` FROM secrets ORDER BY name`)
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
