package workspace

// A workspace's history: listing and comparing versions, rolling back to
// one, and keeping the history within its bound on disk.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// Versions lists the workspace's history, newest first, at most limit.
func (s *Store) Versions(ctx context.Context, id string, limit int) ([]api.WorkspaceVersion, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT version, created_at, caller, executor, command, exit_code, added, modified, removed
		FROM versions WHERE workspace = ? ORDER BY version DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []api.WorkspaceVersion
	for rows.Next() {
		var v api.WorkspaceVersion
		var at int64
		if err := rows.Scan(&v.Version, &at, &v.CreatedBy, &v.Executor, &v.Command, &v.ExitCode, &v.Added, &v.Modified, &v.Removed); err != nil {
			return nil, err
		}
		v.CreatedAt = time.Unix(0, at).UTC()
		out = append(out, v)
	}
	return out, rows.Err()
}

// Diff lists the paths whose entries differ between versions from and to
// of the workspace (r.Head at most).
func (s *Store) Diff(ctx context.Context, r Record, from, to int64) ([]api.WorkspaceChange, error) {
	if err := checkVersion(r, from); err != nil {
		return nil, err
	}
	if err := checkVersion(r, to); err != nil {
		return nil, err
	}
	a, err := s.entriesAt(ctx, s.r, r.ID, from)
	if err != nil {
		return nil, err
	}
	b, err := s.entriesAt(ctx, s.r, r.ID, to)
	if err != nil {
		return nil, err
	}
	var out []api.WorkspaceChange
	for _, ch := range compare(a, b) {
		out = append(out, ch.change)
	}
	return out, nil
}

func checkVersion(r Record, v int64) error {
	if v < r.Oldest || v > r.Head {
		return errdefs.Invalid("workspace %s has versions %d to %d; there is no version %d%s", r.Name, r.Oldest, r.Head, v, prunedNote(r))
	}
	return nil
}

func prunedNote(r Record) string {
	if r.Oldest == 0 {
		return ""
	}
	return fmt.Sprintf(" (versions before %d were pruned to keep its history within %d bytes)", r.Oldest, historyBound(r))
}

// historyBound is what a workspace's history may hold in contents (each
// once, whichever versions share it): four times its quota.
func historyBound(r Record) int64 { return 4 * r.MaxBytes }

// pruneHistory drops the oldest versions while the contents the
// workspace's history holds are past historyBound (tx holds the write
// lock), and returns an upper bound of what it holds after. The current
// version is never touched: it fits the quota, which is below the bound.
// A version v is dropped by removing the entry rows that died at v or
// before: every version from v on keeps all its rows.
//
// added is at least what the commit makes the history's contents grow
// by: while the bound known for r.Head plus added stays
// within historyBound, nothing is summed, so a small change to a large
// workspace does not read every content row.
func (s *Store) pruneHistory(ctx context.Context, tx *sql.Tx, r Record, added int64) (int64, error) {
	bound := historyBound(r)
	if bound <= 0 {
		return -1, nil
	}
	s.mu.Lock()
	known, ok := s.stored[r.ID]
	s.mu.Unlock()
	if ok && known.version == r.Head && known.bytes+added <= bound {
		return known.bytes + added, nil
	}
	stored := func() (int64, error) {
		var n int64
		err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM blobs WHERE hash IN
			(SELECT DISTINCT hash FROM entries WHERE workspace = ? AND hash IS NOT NULL)`, r.ID).Scan(&n)
		return n, err
	}
	n, err := stored()
	for err == nil && n > bound {
		var cut sql.NullInt64
		if err = tx.QueryRowContext(ctx, "SELECT MIN(until) FROM entries WHERE workspace = ? AND until IS NOT NULL", r.ID).Scan(&cut); err != nil || !cut.Valid {
			break
		}
		if _, err := dropBefore(ctx, tx, r.ID, cut.Int64); err != nil {
			return -1, err
		}
		n, err = stored()
	}
	if err != nil {
		return -1, err
	}
	return n, nil
}

// dropBefore removes the versions before cut (tx holds the write lock):
// the entry rows that died at cut or before, the versions' rows, and the
// contents no other row holds, whose bytes it returns. Every version from
// cut on keeps all its rows.
func dropBefore(ctx context.Context, tx *sql.Tx, id string, cut int64) (freed int64, err error) {
	var hashes []string
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT hash FROM entries WHERE workspace = ? AND until <= ? AND hash IS NOT NULL", id, cut)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return 0, err
		}
		hashes = append(hashes, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, q := range []string{
		"DELETE FROM entries WHERE workspace = ? AND until IS NOT NULL AND until <= ?",
		"DELETE FROM versions WHERE workspace = ? AND version < ?",
		"UPDATE workspaces SET oldest = MAX(oldest, ?2) WHERE id = ?1",
	} {
		if _, err := tx.ExecContext(ctx, q, id, cut); err != nil {
			return 0, err
		}
	}
	for _, h := range hashes {
		var size int64
		err := tx.QueryRowContext(ctx, "DELETE FROM blobs WHERE hash = ?1 AND NOT EXISTS (SELECT 1 FROM entries WHERE hash = ?1) RETURNING size", h).Scan(&size)
		switch {
		case errors.Is(err, sql.ErrNoRows): // still held
		case err != nil:
			return 0, err
		default:
			freed += size
		}
	}
	return freed, nil
}

// Prune drops the versions of r before version before, by hand: they can
// no longer be diffed, read or rolled back to, and the contents only they
// held are freed. The current version is always kept. It is recorded in
// the ledger.
func (s *Store) Prune(ctx context.Context, r Record, before int64, caller string) (api.WorkspacePruneResult, error) {
	if before < 0 || before > r.Head {
		return api.WorkspacePruneResult{}, errdefs.Invalid("before %d: %s is at version %d; give a version from %d to %d (the current version is always kept)", before, r.Name, r.Head, r.Oldest, r.Head)
	}
	out := api.WorkspacePruneResult{Oldest: r.Oldest}
	if before <= r.Oldest {
		return out, nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return out, err
	}
	defer tx.Rollback()
	var oldest int64
	if err := tx.QueryRowContext(ctx, "SELECT oldest FROM workspaces WHERE id = ?", r.ID).Scan(&oldest); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return out, errNotFound(r.ID)
		}
		return out, err
	}
	var dropped int64
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM versions WHERE workspace = ? AND version < ?", r.ID, before).Scan(&dropped); err != nil {
		return out, err
	}
	freed, err := dropBefore(ctx, tx, r.ID, before)
	if err != nil {
		return out, err
	}
	if err := s.logCommand(ctx, tx, r.ID, &api.WorkspaceCommand{
		At: time.Now().UTC(), Caller: caller, Command: fmt.Sprintf("prune versions before %d", before),
		BaseVersion: r.Head, Version: r.Head,
	}); err != nil {
		return out, err
	}
	if err := tx.Commit(); err != nil {
		return out, err
	}
	s.mu.Lock()
	delete(s.stored, r.ID)
	s.mu.Unlock()
	return api.WorkspacePruneResult{Oldest: max(oldest, before), Versions: dropped, FreedBytes: freed}, nil
}

type difference struct {
	change api.WorkspaceChange
	// to is the entry in the second set (absent for a removal).
	to vfs.Entry
}

// compare lists what differs from a to b (both sorted by path).
func compare(a, b []vfs.Entry) []difference {
	old := make(map[string]vfs.Entry, len(a))
	for _, e := range a {
		old[e.Path] = e
	}
	var out []difference
	for _, e := range b {
		o, had := old[e.Path]
		delete(old, e.Path)
		switch {
		case !had:
			out = append(out, difference{api.WorkspaceChange{Path: e.Path, Kind: api.ChangeAdded, Dir: e.Dir}, e})
		case o.Dir != e.Dir || o.Hash != e.Hash || o.Mode != e.Mode || !o.ModTime.Equal(e.ModTime):
			out = append(out, difference{api.WorkspaceChange{Path: e.Path, Kind: api.ChangeModified, Dir: e.Dir}, e})
		}
	}
	for p, o := range old {
		out = append(out, difference{change: api.WorkspaceChange{Path: p, Kind: api.ChangeRemoved, Dir: o.Dir}})
	}
	slices.SortFunc(out, func(x, y difference) int { return strings.Compare(x.change.Path, y.change.Path) })
	return out
}

// Rollback makes a new version whose files are those of version, as a
// commit of the differences from the current version.
func (s *Store) Rollback(ctx context.Context, r Record, version int64, caller string) (int64, []api.WorkspaceChange, error) {
	if err := checkVersion(r, version); err != nil {
		return 0, nil, err
	}
	cur, err := s.entriesAt(ctx, s.r, r.ID, r.Head)
	if err != nil {
		return 0, nil, err
	}
	want, err := s.entriesAt(ctx, s.r, r.ID, version)
	if err != nil {
		return 0, nil, err
	}
	var changes []vfs.Change
	for _, d := range compare(cur, want) {
		if d.change.Kind == api.ChangeRemoved {
			changes = append(changes, vfs.Change{Entry: vfs.Entry{Path: d.change.Path, Dir: d.change.Dir}, Removed: true})
			continue
		}
		changes = append(changes, vfs.Change{Entry: d.to})
	}
	out := &api.WorkspaceRunResult{BaseVersion: r.Head, Version: r.Head}
	err = s.finish(ctx, Commit{
		Workspace: r.ID, Base: r.Head, Changes: changes, Caller: caller,
		Command: fmt.Sprintf("rollback to version %d", version),
	}, out)
	return out.Version, out.Changes, err
}
