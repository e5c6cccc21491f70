package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// maxIdemBody bounds a remembered response; the server keeps less.
const maxIdemBody = 16 << 20

func validateIdem(r *store.IdempotencyRecord) error {
	if r == nil {
		return errdefs.Invalid("idempotency record is nil")
	}
	if err := checkID("idempotency key", r.Key); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{
		{"fingerprint", r.Fingerprint}, {"method", r.Method}, {"path", r.Path},
		{"owner", r.Owner}, {"content type", r.ContentType},
	} {
		if err := checkText(f.field, f.v, maxTextLen); err != nil {
			return err
		}
	}
	switch r.State {
	case store.IdemInProgress, store.IdemDone, store.IdemAborted, store.IdemTooLarge:
	default:
		return errdefs.Invalid("idempotency state %q is not known", truncate(r.State))
	}
	if len(r.Body) > maxIdemBody {
		return errdefs.Invalid("idempotent response is larger than %d bytes", maxIdemBody)
	}
	if r.CreatedAt.IsZero() || r.ExpiresAt.IsZero() {
		return errdefs.Invalid("idempotency record needs created and expiry times")
	}
	if err := checkTime("created_at", r.CreatedAt); err != nil {
		return err
	}
	return checkTime("expires_at", r.ExpiresAt)
}

// BeginIdempotent claims r.Key, or returns the live record that holds it.
func (st *Store) BeginIdempotent(ctx context.Context, r *store.IdempotencyRecord) (*store.IdempotencyRecord, bool, error) {
	r.State = store.IdemInProgress
	if err := validateIdem(r); err != nil {
		return nil, false, err
	}
	var existing *store.IdempotencyRecord
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		var (
			e                store.IdempotencyRecord
			created, expires int64
		)
		err := tx.QueryRowContext(ctx,
			`SELECT key, fingerprint, method, path, state, owner, status, content_type, body, created_at, expires_at
			FROM idempotency_keys WHERE key = ?`, r.Key).Scan(
			&e.Key, &e.Fingerprint, &e.Method, &e.Path, &e.State, &e.Owner, &e.Status, &e.ContentType, &e.Body, &created, &expires)
		switch {
		case err == nil && expires > r.CreatedAt.UnixNano():
			e.CreatedAt, e.ExpiresAt = time.Unix(0, created).UTC(), time.Unix(0, expires).UTC()
			existing = &e
			return nil
		case err == nil:
			if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE key = ?`, r.Key); err != nil {
				return fmt.Errorf("store: replace an expired idempotency key: %w", ctxErr(ctx, err))
			}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("store: look up an idempotency key: %w", ctxErr(ctx, err))
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO idempotency_keys (key, fingerprint, method, path, state, owner, status, content_type, body, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, 0, '', NULL, ?, ?)`,
			r.Key, r.Fingerprint, r.Method, r.Path, r.State, r.Owner, r.CreatedAt.UnixNano(), r.ExpiresAt.UnixNano())
		if err != nil {
			return fmt.Errorf("store: record an idempotency key: %w", ctxErr(ctx, err))
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return existing, existing == nil, nil
}

// FinishIdempotent records the outcome of a claimed key.
func (st *Store) FinishIdempotent(ctx context.Context, r *store.IdempotencyRecord) error {
	if err := validateIdem(r); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE idempotency_keys SET state = ?, status = ?, content_type = ?, body = ? WHERE key = ?`,
			r.State, r.Status, r.ContentType, r.Body, r.Key)
		if err != nil {
			return fmt.Errorf("store: record an idempotent result: %w", ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("idempotency key")
		}
		return nil
	})
}

// ForgetIdempotent deletes one key's record.
func (st *Store) ForgetIdempotent(ctx context.Context, key string) error {
	if err := checkID("idempotency key", key); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE key = ?`, key); err != nil {
			return fmt.Errorf("store: forget an idempotency key: %w", ctxErr(ctx, err))
		}
		return nil
	})
}

// PurgeIdempotency forgets expired keys.
func (st *Store) PurgeIdempotency(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, t.UnixNano())
		if err != nil {
			return fmt.Errorf("store: purge idempotency keys: %w", ctxErr(ctx, err))
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

const backupColumns = `id, sandbox_id, sandbox_name, path, excludes, size_bytes, sha256, storage, created_at, expires_at, owner`

func validateBackup(b *store.Backup) error {
	if b == nil {
		return errdefs.Invalid("backup is nil")
	}
	if err := checkID("backup id", b.ID); err != nil {
		return err
	}
	if err := checkID("sandbox id", b.SandboxID); err != nil {
		return err
	}
	for _, f := range []struct {
		field, v string
		max      int
	}{
		{"sandbox name", b.SandboxName, maxNameLen}, {"path", b.Path, maxLedgerPath},
		{"sha256", b.SHA256, maxTextLen}, {"storage", b.Storage, maxTextLen}, {"owner", b.Owner, maxIDLen},
	} {
		if err := checkText(f.field, f.v, f.max); err != nil {
			return err
		}
	}
	if b.Path == "" || b.SHA256 == "" || b.Storage == "" {
		return errdefs.Invalid("backup needs a path, a sha256 and a storage")
	}
	if len(b.Excludes) > maxMapEntries {
		return errdefs.Invalid("backup has more than %d excludes", maxMapEntries)
	}
	for _, x := range b.Excludes {
		if err := checkText("exclude", x, maxMapKeyLen); err != nil {
			return err
		}
	}
	if b.SizeBytes < 0 {
		return errdefs.Invalid("backup size must not be negative")
	}
	if err := checkTime("created_at", b.CreatedAt); err != nil {
		return err
	}
	return checkTime("expires_at", b.ExpiresAt)
}

// CreateBackup inserts b; CreatedAt defaults to now.
func (st *Store) CreateBackup(ctx context.Context, b *store.Backup) error {
	if err := validateBackup(b); err != nil {
		return err
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = now()
	}
	ex, err := json.Marshal(b.Excludes)
	if err != nil {
		return errdefs.Invalid("excludes cannot be encoded")
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO backups (`+backupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, b.SandboxID, b.SandboxName, b.Path, string(ex), b.SizeBytes, b.SHA256, b.Storage,
			b.CreatedAt.UnixNano(), nanos(b.ExpiresAt), b.Owner)
		if isUniqueViolation(err) {
			return fmt.Errorf("backup %q already exists: %w", b.ID, errdefs.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: create backup %q: %w", b.ID, ctxErr(ctx, err))
		}
		return nil
	})
}

func scanBackup(sc scanner) (*store.Backup, error) {
	var (
		b       store.Backup
		ex      string
		created int64
		expires sql.NullInt64
	)
	if err := sc.Scan(&b.ID, &b.SandboxID, &b.SandboxName, &b.Path, &ex, &b.SizeBytes, &b.SHA256, &b.Storage, &created, &expires, &b.Owner); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(ex), &b.Excludes); err != nil {
		return nil, fmt.Errorf("store: backup %q: decode excludes: %w", b.ID, err)
	}
	b.CreatedAt, b.ExpiresAt = time.Unix(0, created).UTC(), fromNanos(expires)
	return &b, nil
}

// GetBackup returns one backup record.
func (st *Store) GetBackup(ctx context.Context, id string) (*store.Backup, error) {
	if err := checkID("backup id", id); err != nil {
		return nil, err
	}
	b, err := scanBackup(st.r.QueryRowContext(ctx, `SELECT `+backupColumns+` FROM backups WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("backup %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get backup %q: %w", id, ctxErr(ctx, err))
	}
	return b, nil
}

func (st *Store) queryBackups(ctx context.Context, q string, args ...any) ([]*store.Backup, error) {
	rows, err := st.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list backups: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	out := []*store.Backup{}
	for rows.Next() {
		b, err := scanBackup(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list backups: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list backups: %w", ctxErr(ctx, err))
	}
	return out, nil
}

// ListBackups lists backups oldest first.
func (st *Store) ListBackups(ctx context.Context, sandboxID string) ([]*store.Backup, error) {
	if sandboxID == "" {
		return st.queryBackups(ctx, `SELECT `+backupColumns+` FROM backups ORDER BY created_at, id`)
	}
	if err := checkID("sandbox id", sandboxID); err != nil {
		return nil, err
	}
	return st.queryBackups(ctx, `SELECT `+backupColumns+` FROM backups WHERE sandbox_id = ? ORDER BY created_at, id`, sandboxID)
}

// ExpiredBackups lists backups expired at t.
func (st *Store) ExpiredBackups(ctx context.Context, t time.Time) ([]*store.Backup, error) {
	return st.queryBackups(ctx, `SELECT `+backupColumns+` FROM backups
		WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at, id`, t.UnixNano())
}

// DeleteBackup removes a backup record.
func (st *Store) DeleteBackup(ctx context.Context, id string) error {
	if err := checkID("backup id", id); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM backups WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("store: delete backup %q: %w", id, ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("backup %q", id)
		}
		return nil
	})
}
