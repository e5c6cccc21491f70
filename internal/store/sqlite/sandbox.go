package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

const sandboxColumns = `id, name, state, error_reason, image, image_digest, runtime,
	resources, env, labels, sleep_after_ns, keep_alive, timeout_ns,
	created_at, updated_at, last_activity_at, snapshot_id, snapshot_layers, on_idle, key_id`

// sandboxRow holds a sandbox in its column encoding.
type sandboxRow struct {
	resources, env, labels string
	snapshotLayers         string
	created, updated, last sql.NullInt64
}

func encodeSandbox(s *store.Sandbox) (sandboxRow, error) {
	var row sandboxRow
	res, err := json.Marshal(s.Resources)
	if err != nil {
		return row, errdefs.Invalid("resources cannot be encoded")
	}
	env, err := json.Marshal(s.Env)
	if err != nil {
		return row, errdefs.Invalid("env cannot be encoded")
	}
	labels, err := json.Marshal(s.Labels)
	if err != nil {
		return row, errdefs.Invalid("labels cannot be encoded")
	}
	row.resources, row.env, row.labels = string(res), string(env), string(labels)
	layers, err := json.Marshal(s.SnapshotLayers)
	if err != nil {
		return row, errdefs.Invalid("snapshot layers cannot be encoded")
	}
	row.snapshotLayers = string(layers)
	row.created, row.updated, row.last = nanos(s.CreatedAt), nanos(s.UpdatedAt), nanos(s.LastActivityAt)
	return row, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanSandbox(sc scanner) (*store.Sandbox, error) {
	var (
		s                   store.Sandbox
		row                 sandboxRow
		sleepAfter, timeout int64
		keepAlive           bool
	)
	if err := sc.Scan(&s.ID, &s.Name, &s.State, &s.ErrorReason, &s.Image, &s.ImageDigest, &s.Runtime,
		&row.resources, &row.env, &row.labels, &sleepAfter, &keepAlive, &timeout,
		&row.created, &row.updated, &row.last, &s.SnapshotID, &row.snapshotLayers, &s.OnIdle, &s.KeyID); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(row.resources), &s.Resources); err != nil {
		return nil, fmt.Errorf("store: sandbox %q: decode resources: %w", s.ID, err)
	}
	if err := json.Unmarshal([]byte(row.env), &s.Env); err != nil {
		return nil, fmt.Errorf("store: sandbox %q: decode env: %w", s.ID, err)
	}
	if err := json.Unmarshal([]byte(row.labels), &s.Labels); err != nil {
		return nil, fmt.Errorf("store: sandbox %q: decode labels: %w", s.ID, err)
	}
	if err := json.Unmarshal([]byte(row.snapshotLayers), &s.SnapshotLayers); err != nil {
		return nil, fmt.Errorf("store: sandbox %q: decode snapshot layers: %w", s.ID, err)
	}
	s.SleepAfter, s.Timeout, s.KeepAlive = time.Duration(sleepAfter), time.Duration(timeout), keepAlive
	s.CreatedAt, s.UpdatedAt, s.LastActivityAt = fromNanos(row.created), fromNanos(row.updated), fromNanos(row.last)
	return &s, nil
}

// now is the store's clock; times are kept in UTC without a monotonic
// reading, which is what reading them back yields.
func now() time.Time { return time.Now().UTC().Round(0) }

// CreateSandbox inserts s. A zero CreatedAt becomes now and a zero UpdatedAt
// becomes CreatedAt; both are written back into s.
func (st *Store) CreateSandbox(ctx context.Context, s *store.Sandbox) error {
	if err := validateSandbox(s); err != nil {
		return err
	}
	rec := *s
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now()
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	row, err := encodeSandbox(&rec)
	if err != nil {
		return err
	}
	err = st.writeTx(ctx, func(tx *sql.Tx) error {
		// Checked first for a precise message; the constraints below
		// remain the guarantee.
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM sandboxes WHERE id = ?`, rec.ID).Scan(&one)
		switch {
		case err == nil:
			return fmt.Errorf("sandbox %q already exists: %w", rec.ID, errdefs.ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("store: create sandbox %q: %w", rec.ID, ctxErr(ctx, err))
		}
		if err := checkNameFree(ctx, tx, &rec); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			rec.ID, rec.Name, rec.State, rec.ErrorReason, rec.Image, rec.ImageDigest, rec.Runtime,
			row.resources, row.env, row.labels, int64(rec.SleepAfter), rec.KeepAlive, int64(rec.Timeout),
			row.created, row.updated, row.last, rec.SnapshotID, row.snapshotLayers, rec.OnIdle, rec.KeyID)
		if isUniqueViolation(err) {
			return fmt.Errorf("sandbox %q or name %q already in use: %w", rec.ID, rec.Name, errdefs.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: create sandbox %q: %w", rec.ID, ctxErr(ctx, err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.CreatedAt, s.UpdatedAt = rec.CreatedAt, rec.UpdatedAt
	return nil
}

// checkNameFree reports ErrConflict when another live sandbox of s's owner
// holds s's name; other owners' names are theirs.
func checkNameFree(ctx context.Context, tx *sql.Tx, s *store.Sandbox) error {
	if s.Name == "" || s.State == api.StateDestroyed {
		return nil
	}
	var other string
	err := tx.QueryRowContext(ctx,
		`SELECT id FROM sandboxes WHERE key_id = ? AND name = ? AND state <> ? AND id <> ?`,
		s.KeyID, s.Name, api.StateDestroyed, s.ID).Scan(&other)
	switch {
	case err == nil:
		return fmt.Errorf("sandbox name %q is in use by sandbox %q: %w", s.Name, other, errdefs.ErrConflict)
	case errors.Is(err, sql.ErrNoRows):
		return nil
	default:
		return fmt.Errorf("store: check sandbox name %q: %w", s.Name, ctxErr(ctx, err))
	}
}

// GetSandbox returns the sandbox with id, destroyed or not.
func (st *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	if err := checkID("sandbox id", id); err != nil {
		return nil, err
	}
	row, err := st.readRow(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("store: get sandbox %q: %w", id, ctxErr(ctx, err))
	}
	s, err := scanSandbox(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("sandbox %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get sandbox %q: %w", id, ctxErr(ctx, err))
	}
	return s, nil
}

// SandboxesByName returns the live (not destroyed) sandboxes named name,
// one at most per owner, oldest first.
func (st *Store) SandboxesByName(ctx context.Context, name string) ([]*store.Sandbox, error) {
	if name == "" {
		return nil, errdefs.Invalid("sandbox name is empty")
	}
	if err := checkText("sandbox name", name, maxNameLen); err != nil {
		return nil, err
	}
	rows, err := st.r.QueryContext(ctx,
		`SELECT `+sandboxColumns+` FROM sandboxes WHERE name = ? AND state <> ? ORDER BY created_at, rowid`,
		name, api.StateDestroyed)
	if err != nil {
		return nil, fmt.Errorf("store: sandboxes named %q: %w", name, ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Sandbox
	for rows.Next() {
		s, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("store: sandboxes named %q: %w", name, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: sandboxes named %q: %w", name, ctxErr(ctx, err))
	}
	return out, nil
}

// ListSandboxes returns live sandboxes carrying every label in labels,
// oldest first; sandboxes created at the same instant keep insertion order.
func (st *Store) ListSandboxes(ctx context.Context, labels map[string]string) ([]*store.Sandbox, error) {
	if len(labels) > maxLabelFilter {
		return nil, errdefs.Invalid("at most %d labels may be filtered on", maxLabelFilter)
	}
	if err := checkMap("label filter", labels); err != nil {
		return nil, err
	}
	var (
		q    strings.Builder
		args = []any{api.StateDestroyed}
	)
	q.WriteString(`SELECT ` + sandboxColumns + ` FROM sandboxes WHERE state <> ?`)
	// Sorted so the same filter always yields the same statement text,
	// which keeps the prepared-statement cache useful.
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		// json_each instead of a JSON path: keys may hold any character,
		// and a path would need its own escaping.
		q.WriteString(` AND EXISTS (SELECT 1 FROM json_each(sandboxes.labels) AS l
			WHERE l.key = ? AND l.type = 'text' AND l.value = ?)`)
		args = append(args, k, labels[k])
	}
	q.WriteString(` ORDER BY created_at, rowid`)

	rows, err := st.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list sandboxes: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Sandbox
	for rows.Next() {
		s, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list sandboxes: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list sandboxes: %w", ctxErr(ctx, err))
	}
	return out, nil
}

// UpdateSandbox replaces the record with s.ID. UpdatedAt is set to now;
// CreatedAt is kept from the stored record, since a sandbox is created once.
// Both are written back into s.
func (st *Store) UpdateSandbox(ctx context.Context, s *store.Sandbox) error {
	return st.updateSandbox(ctx, s, false)
}

// ClaimSandbox replaces the record with s.ID as UpdateSandbox does and, in
// the same transaction, hands the sandbox to s.KeyID (UpdateSandbox keeps
// the creator): a claimed sandbox is never left relabelled but unowned.
func (st *Store) ClaimSandbox(ctx context.Context, s *store.Sandbox) error {
	if err := checkText("key id", s.KeyID, maxIDLen); err != nil {
		return err
	}
	return st.updateSandbox(ctx, s, true)
}

func (st *Store) updateSandbox(ctx context.Context, s *store.Sandbox, owner bool) error {
	if err := validateSandbox(s); err != nil {
		return err
	}
	rec := *s
	rec.UpdatedAt = now()
	row, err := encodeSandbox(&rec)
	if err != nil {
		return err
	}
	var created sql.NullInt64
	err = st.writeTx(ctx, func(tx *sql.Tx) error {
		err := st.txRow(ctx, tx, qSandboxCreatedAt, rec.ID).Scan(&created)
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("sandbox %q", rec.ID)
		}
		if err != nil {
			return fmt.Errorf("store: update sandbox %q: %w", rec.ID, ctxErr(ctx, err))
		}
		if err := checkNameFree(ctx, tx, &rec); err != nil {
			return err
		}
		_, err = st.txExec(ctx, tx, qUpdateSandbox,
			rec.Name, rec.State, rec.ErrorReason, rec.Image, rec.ImageDigest, rec.Runtime,
			row.resources, row.env, row.labels, int64(rec.SleepAfter), rec.KeepAlive, int64(rec.Timeout),
			row.updated, row.last, rec.SnapshotID, row.snapshotLayers, rec.OnIdle, rec.ID)
		if isUniqueViolation(err) {
			return fmt.Errorf("sandbox name %q is in use: %w", rec.Name, errdefs.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: update sandbox %q: %w", rec.ID, ctxErr(ctx, err))
		}
		if owner {
			if _, err := st.txExec(ctx, tx, qSetSandboxOwner, rec.KeyID, rec.ID); err != nil {
				return fmt.Errorf("store: set owner of sandbox %q: %w", rec.ID, ctxErr(ctx, err))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(created), rec.UpdatedAt
	return nil
}

// DeleteSandbox removes the record and its state history.
func (st *Store) DeleteSandbox(ctx context.Context, id string) error {
	if err := checkID("sandbox id", id); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("store: delete sandbox %q: %w", id, ctxErr(ctx, err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: delete sandbox %q: %w", id, err)
		}
		if n == 0 {
			return errdefs.NotFound("sandbox %q", id)
		}
		return nil
	})
}
