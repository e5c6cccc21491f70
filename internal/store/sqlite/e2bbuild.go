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

var _ store.E2BBuildStore = (*Store)(nil)

// Bounds on a build record's fields (the E2B layer bounds them first).
const (
	maxE2BBuildTags   = 64
	maxE2BBuildReason = 16 << 10
)

var e2bBuildStatuses = map[string]bool{"waiting": true, "building": true, "ready": true, "error": true}

func checkE2BBuild(b *store.E2BBuild) error {
	for _, f := range []struct{ field, v string }{{"build id", b.ID}, {"build owner", b.Owner}, {"template name", b.Name}} {
		if err := checkID(f.field, f.v); err != nil {
			return err
		}
	}
	if !e2bBuildStatuses[b.Status] {
		return errdefs.Invalid("build status %q is not one of waiting, building, ready, error", truncate(b.Status))
	}
	if len(b.Tags) > maxE2BBuildTags {
		return errdefs.Invalid("a build has at most %d tags", maxE2BBuildTags)
	}
	for _, t := range b.Tags {
		if err := checkID("build tag", t); err != nil {
			return err
		}
	}
	if err := checkText("build reason", b.Reason, maxE2BBuildReason); err != nil {
		return err
	}
	if err := checkText("build step", b.Step, maxIDLen); err != nil {
		return err
	}
	if b.CreatedAt.IsZero() {
		return errdefs.Invalid("a build needs its creation time")
	}
	if err := checkTime("build creation time", b.CreatedAt); err != nil {
		return err
	}
	if !b.FinishedAt.IsZero() {
		return checkTime("build end time", b.FinishedAt)
	}
	return nil
}

// PutE2BBuild inserts or replaces the build b.ID.
func (st *Store) PutE2BBuild(ctx context.Context, b *store.E2BBuild) error {
	if err := checkE2BBuild(b); err != nil {
		return err
	}
	tags, err := json.Marshal(append([]string{}, b.Tags...))
	if err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO e2b_builds (id, owner, name, tags, status, reason, step, created_at, finished_at)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, name = excluded.name, tags = excluded.tags,
			   status = excluded.status, reason = excluded.reason, step = excluded.step,
			   created_at = excluded.created_at, finished_at = excluded.finished_at`,
			b.ID, b.Owner, b.Name, string(tags), b.Status, b.Reason, b.Step, b.CreatedAt.UnixNano(), nanos(b.FinishedAt))
		if err != nil {
			return fmt.Errorf("store: put template build %q: %w", b.ID, ctxErr(ctx, err))
		}
		return nil
	})
}

// GetE2BBuild finds the build id of the template name.
func (st *Store) GetE2BBuild(ctx context.Context, name, id string) (*store.E2BBuild, error) {
	if err := checkID("template name", name); err != nil {
		return nil, err
	}
	if err := checkID("build id", id); err != nil {
		return nil, err
	}
	var (
		b        store.E2BBuild
		tags     string
		created  int64
		finished sql.NullInt64
	)
	err := st.r.QueryRowContext(ctx,
		`SELECT id, owner, name, tags, status, reason, step, created_at, finished_at FROM e2b_builds WHERE id = ? AND name = ?`, id, name).
		Scan(&b.ID, &b.Owner, &b.Name, &tags, &b.Status, &b.Reason, &b.Step, &created, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("template build %q of %q", truncate(id), truncate(name))
	}
	if err != nil {
		return nil, fmt.Errorf("store: get template build: %w", ctxErr(ctx, err))
	}
	if err := json.Unmarshal([]byte(tags), &b.Tags); err != nil {
		return nil, fmt.Errorf("store: template build %q: tags: %w", id, err)
	}
	b.CreatedAt, b.FinishedAt = time.Unix(0, created).UTC(), fromNanos(finished)
	return &b, nil
}

// PruneE2BBuilds removes the builds created before before, then the
// oldest beyond keep.
func (st *Store) PruneE2BBuilds(ctx context.Context, before time.Time, keep int) (int, error) {
	var n int64
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM e2b_builds WHERE created_at < ?`, before.UnixNano())
		if err != nil {
			return fmt.Errorf("store: prune template builds: %w", ctxErr(ctx, err))
		}
		n, _ = res.RowsAffected()
		res, err = tx.ExecContext(ctx,
			`DELETE FROM e2b_builds WHERE id IN (SELECT id FROM e2b_builds ORDER BY created_at DESC, id LIMIT -1 OFFSET ?)`, max(keep, 0))
		if err != nil {
			return fmt.Errorf("store: prune template builds: %w", ctxErr(ctx, err))
		}
		m, _ := res.RowsAffected()
		n += m
		return nil
	})
	return int(n), err
}

// EndE2BBuilds marks every build still waiting or building as an error
// with reason.
func (st *Store) EndE2BBuilds(ctx context.Context, reason string, at time.Time) (int, error) {
	if err := checkText("build reason", reason, maxE2BBuildReason); err != nil {
		return 0, err
	}
	var n int64
	err := st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE e2b_builds SET status = 'error', reason = ?, finished_at = ? WHERE status IN ('waiting', 'building')`, reason, at.UnixNano())
		if err != nil {
			return fmt.Errorf("store: end template builds: %w", ctxErr(ctx, err))
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}
