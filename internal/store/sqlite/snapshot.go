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

const snapshotColumns = `id, name, sandbox_id, image, image_digest, parent, layers, size, created_at, expires_at, ttl_ns, owner, memory`

// maxSnapshotLayers bounds a stored chain; the controller's bound is lower.
const maxSnapshotLayers = 128

func validateSnapshot(s *store.Snapshot) error {
	if s == nil {
		return errdefs.Invalid("snapshot is nil")
	}
	if err := checkID("snapshot id", s.ID); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{
		{"snapshot name", s.Name}, {"sandbox id", s.SandboxID}, {"image", s.Image},
		{"image digest", s.ImageDigest}, {"parent", s.Parent}, {"owner", s.Owner},
	} {
		if err := checkText(f.field, f.v, maxTextLen); err != nil {
			return err
		}
	}
	if s.ImageDigest == "" {
		return errdefs.Invalid("snapshot has no image digest")
	}
	if len(s.Layers) == 0 || len(s.Layers) > maxSnapshotLayers {
		return errdefs.Invalid("snapshot needs 1 to %d layers", maxSnapshotLayers)
	}
	for _, l := range s.Layers {
		if err := checkText("layer digest", l.Digest, maxTextLen); err != nil {
			return err
		}
		if l.Digest == "" || l.Size < 0 || l.Added < 0 {
			return errdefs.Invalid("snapshot has an invalid layer")
		}
	}
	if s.Size < 0 {
		return errdefs.Invalid("snapshot size is negative")
	}
	if m := s.Memory; m != nil {
		if m.Runtime == "" || m.Format == "" || m.Bytes < 0 {
			return errdefs.Invalid("snapshot memory needs a runtime, a format and a size")
		}
		for _, f := range []struct{ field, v string }{{"memory runtime", m.Runtime}, {"memory format", m.Format}} {
			if err := checkText(f.field, f.v, 200); err != nil {
				return err
			}
		}
	}
	return checkSnapshotTTL(s.TTL, s.ExpiresAt)
}

// checkSnapshotTTL: a TTL and an expiry come together, or neither (never).
func checkSnapshotTTL(ttl time.Duration, expiresAt time.Time) error {
	if ttl < 0 {
		return errdefs.Invalid("snapshot ttl is negative")
	}
	if (ttl == 0) != expiresAt.IsZero() {
		return errdefs.Invalid("snapshot ttl %s and expiry %v disagree: both are set, or neither (never)", ttl, expiresAt)
	}
	return nil
}

func scanSnapshot(sc scanner) (*store.Snapshot, error) {
	var (
		s                store.Snapshot
		layers           string
		created, expires sql.NullInt64
		ttl              int64
		memory           string
	)
	if err := sc.Scan(&s.ID, &s.Name, &s.SandboxID, &s.Image, &s.ImageDigest, &s.Parent,
		&layers, &s.Size, &created, &expires, &ttl, &s.Owner, &memory); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(layers), &s.Layers); err != nil {
		return nil, fmt.Errorf("store: snapshot %q: decode layers: %w", s.ID, err)
	}
	if memory != "" {
		s.Memory = new(store.SnapshotMemory)
		if err := json.Unmarshal([]byte(memory), s.Memory); err != nil {
			return nil, fmt.Errorf("store: snapshot %q: decode memory: %w", s.ID, err)
		}
	}
	s.CreatedAt, s.ExpiresAt = fromNanos(created), fromNanos(expires)
	s.TTL = time.Duration(ttl)
	return &s, nil
}

// CreateSnapshot inserts s; a zero CreatedAt becomes now.
func (st *Store) CreateSnapshot(ctx context.Context, s *store.Snapshot) error {
	if err := validateSnapshot(s); err != nil {
		return err
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now()
	}
	layers, err := json.Marshal(s.Layers)
	if err != nil {
		return errdefs.Invalid("snapshot layers cannot be encoded")
	}
	var memory []byte
	if s.Memory != nil {
		if memory, err = json.Marshal(s.Memory); err != nil {
			return errdefs.Invalid("snapshot memory cannot be encoded")
		}
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			s.ID, s.Name, s.SandboxID, s.Image, s.ImageDigest, s.Parent, string(layers), s.Size,
			nanos(s.CreatedAt), nanos(s.ExpiresAt), int64(s.TTL), s.Owner, string(memory))
		if isUniqueViolation(err) {
			if s.Name != "" {
				return fmt.Errorf("a snapshot named %q already exists: %w", s.Name, errdefs.ErrConflict)
			}
			return fmt.Errorf("snapshot %q already exists: %w", s.ID, errdefs.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: create snapshot %q: %w", s.ID, ctxErr(ctx, err))
		}
		return nil
	})
}

// GetSnapshot returns the snapshot with id.
func (st *Store) GetSnapshot(ctx context.Context, id string) (*store.Snapshot, error) {
	if err := checkID("snapshot id", id); err != nil {
		return nil, err
	}
	return st.getSnapshot(ctx, `id = ?`, id, "snapshot %q")
}

// SnapshotsByName returns the snapshots named name, one at most per owner,
// oldest first.
func (st *Store) SnapshotsByName(ctx context.Context, name string) ([]*store.Snapshot, error) {
	if name == "" {
		return nil, errdefs.Invalid("snapshot name is empty")
	}
	if err := checkText("snapshot name", name, maxNameLen); err != nil {
		return nil, err
	}
	return st.listSnapshots(ctx, "snapshots named", `WHERE name = ?`, name)
}

func (st *Store) getSnapshot(ctx context.Context, where, arg, what string) (*store.Snapshot, error) {
	s, err := scanSnapshot(st.r.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound(what, arg)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get "+what+": %w", arg, ctxErr(ctx, err))
	}
	return s, nil
}

// ListSnapshots lists every snapshot, oldest first.
func (st *Store) ListSnapshots(ctx context.Context) ([]*store.Snapshot, error) {
	return st.listSnapshots(ctx, "list snapshots", ``)
}

func (st *Store) listSnapshots(ctx context.Context, what, where string, args ...any) ([]*store.Snapshot, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots `+where+` ORDER BY created_at, rowid`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Snapshot
	for rows.Next() {
		s, err := scanSnapshot(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, ctxErr(ctx, err))
	}
	return out, nil
}

// SetSnapshotTTL sets a snapshot's TTL and expiry; both zero means never.
func (st *Store) SetSnapshotTTL(ctx context.Context, id string, ttl time.Duration, expiresAt time.Time) error {
	if err := checkID("snapshot id", id); err != nil {
		return err
	}
	if err := checkSnapshotTTL(ttl, expiresAt); err != nil {
		return err
	}
	return st.snapshotExec(ctx, id, `UPDATE snapshots SET ttl_ns = ?, expires_at = ? WHERE id = ?`, int64(ttl), nanos(expiresAt), id)
}

// RenewSnapshot moves an expiring snapshot's expiry; one that never
// expires keeps none.
func (st *Store) RenewSnapshot(ctx context.Context, id string, expiresAt time.Time) error {
	if err := checkID("snapshot id", id); err != nil {
		return err
	}
	if expiresAt.IsZero() {
		return errdefs.Invalid("renew snapshot %q: no expiry given", id)
	}
	// The row is matched whatever its TTL, so a missing id is told from
	// one that never expires.
	return st.snapshotExec(ctx, id, `UPDATE snapshots SET expires_at = CASE WHEN ttl_ns > 0 THEN ? ELSE NULL END WHERE id = ?`, nanos(expiresAt), id)
}

// DeleteSnapshot removes a snapshot record.
func (st *Store) DeleteSnapshot(ctx context.Context, id string) error {
	if err := checkID("snapshot id", id); err != nil {
		return err
	}
	return st.snapshotExec(ctx, id, `DELETE FROM snapshots WHERE id = ?`, id)
}

func (st *Store) snapshotExec(ctx context.Context, id, q string, args ...any) error {
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("store: snapshot %q: %w", id, ctxErr(ctx, err))
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: snapshot %q: %w", id, err)
		} else if n == 0 {
			return errdefs.NotFound("snapshot %q", id)
		}
		return nil
	})
}
