package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// keyColumns are read in scanKey's order.
const keyColumns = `id, name, prefix, secret_hash, scope, created_by, created_at`

// CreateKey inserts k. A zero CreatedAt becomes now and an empty Scope
// becomes own (the narrower one); both are written back.
func (st *Store) CreateKey(ctx context.Context, k *store.Key) error {
	if err := validateKey(k); err != nil {
		return err
	}
	created := k.CreatedAt
	if created.IsZero() {
		created = now()
	}
	scope := k.Scope
	if scope == "" {
		scope = api.KeyScopeOwn
	}
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Name, k.Prefix, k.SecretHash, scope, k.CreatedBy, nanos(created))
		if isUniqueViolation(err) {
			// The hash colliding means the same secret twice, which only a
			// broken generator produces; either way the key is refused.
			return fmt.Errorf("key %q or its secret already exists: %w", k.ID, errdefs.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: create key %q: %w", k.ID, ctxErr(ctx, err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	k.CreatedAt, k.Scope = created, scope
	return nil
}

func scanKey(sc scanner) (*store.Key, error) {
	var (
		k       store.Key
		created sql.NullInt64
	)
	if err := sc.Scan(&k.ID, &k.Name, &k.Prefix, &k.SecretHash, &k.Scope, &k.CreatedBy, &created); err != nil {
		return nil, err
	}
	k.CreatedAt = fromNanos(created)
	return &k, nil
}

// ListKeys returns every key, oldest first.
func (st *Store) ListKeys(ctx context.Context) ([]*store.Key, error) {
	rows, err := st.r.QueryContext(ctx,
		`SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list keys: %w", ctxErr(ctx, err))
	}
	return out, nil
}

// KeyByHash finds the key whose secret hashes to hash. The message never
// contains the hash: it is as good as a credential for anyone who can
// also read the database.
func (st *Store) KeyByHash(ctx context.Context, hash []byte) (*store.Key, error) {
	if len(hash) != secretHashLength {
		return nil, errdefs.Invalid("key secret hash must be %d bytes", secretHashLength)
	}
	k, err := scanKey(st.r.QueryRowContext(ctx,
		`SELECT `+keyColumns+` FROM api_keys WHERE secret_hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("key")
	}
	if err != nil {
		return nil, fmt.Errorf("store: find key: %w", ctxErr(ctx, err))
	}
	return k, nil
}

// GetKey finds the key with id.
func (st *Store) GetKey(ctx context.Context, id string) (*store.Key, error) {
	if err := checkID("key id", id); err != nil {
		return nil, err
	}
	k, err := scanKey(st.r.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("key %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get key: %w", ctxErr(ctx, err))
	}
	return k, nil
}

// DeleteKey removes the key with id.
func (st *Store) DeleteKey(ctx context.Context, id string) error {
	if err := checkID("key id", id); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("store: delete key %q: %w", id, ctxErr(ctx, err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: delete key %q: %w", id, err)
		}
		if n == 0 {
			return errdefs.NotFound("key %q", id)
		}
		return nil
	})
}
