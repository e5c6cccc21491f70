package workspace

// A workspace's history: listing and comparing versions, rolling back to
// one, and keeping the history within its bound on disk.

import (
	"context"
	"database/sql"
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
		var hashes []string
		rows, qerr := tx.QueryContext(ctx, "SELECT DISTINCT hash FROM entries WHERE workspace = ? AND until <= ? AND hash IS NOT NULL", r.ID, cut.Int64)
		if qerr != nil {
			return -1, qerr
		}
		for rows.Next() {
			var h string
			if err := rows.Scan(&h); err != nil {
				rows.Close()
				return -1, err
			}
			hashes = append(hashes, h)
		}
		rows.Close()
		for _, q := range []string{
			"DELETE FROM entries WHERE workspace = ? AND until IS NOT NULL AND until <= ?",
			"DELETE FROM versions WHERE workspace = ? AND version < ?",
			"UPDATE workspaces SET oldest = MAX(oldest, ?2) WHERE id = ?1",
		} {
			if _, err := tx.ExecContext(ctx, q, r.ID, cut.Int64); err != nil {
				return -1, err
			}
		}
		for _, h := range hashes {
			if _, err := tx.ExecContext(ctx, "DELETE FROM blobs WHERE hash = ?1 AND NOT EXISTS (SELECT 1 FROM entries WHERE hash = ?1)", h); err != nil {
				return -1, err
			}
		}
		n, err = stored()
	}
	if err != nil {
		return -1, err
	}
	return n, nil
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
