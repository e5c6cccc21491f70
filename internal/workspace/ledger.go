package workspace

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// The ledger of a workspace is every command run in it and every file
// written through the file routes, whether it changed files or not: the
// history (versions) lists only what made a version, and is pruned with
// the contents; the ledger keeps its last ledgerKeep entries a workspace.
var (
	ledgerKeep int64 = 10_000
	// ledgerPruneEvery: the ledger is cut back to ledgerKeep entries once
	// in this many inserts.
	ledgerPruneEvery int64 = 64
)

// MaxLedgerPage bounds one page of Ledger.
const MaxLedgerPage = 1000

const ledgerSchema = `
CREATE TABLE IF NOT EXISTS commands (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	workspace   TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	at          INTEGER NOT NULL,
	caller      TEXT NOT NULL,
	executor    TEXT NOT NULL,
	reason      TEXT NOT NULL,
	command     TEXT NOT NULL,
	exit_code   INTEGER NOT NULL,
	duration_us INTEGER NOT NULL,
	base        INTEGER NOT NULL,
	version     INTEGER NOT NULL,
	stopped     TEXT NOT NULL,
	error       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS commands_workspace ON commands (workspace, seq);
`

// finish lands what a command changed, when it ran whole and changed
// something, and records it in the workspace's ledger: in the version's
// own transaction when one is made, else on its own. out is the command's
// result; its Version and Changes are set from what landed. c names the
// command (its Changes are the changes).
func (s *Store) finish(ctx context.Context, c Commit, out *api.WorkspaceRunResult) error {
	ctx = context.WithoutCancel(ctx)
	row := api.WorkspaceCommand{
		At: time.Now().UTC(), Caller: c.Caller, Executor: out.Executor, Reason: out.Reason, Command: c.Command,
		ExitCode: out.ExitCode, DurationMs: out.DurationMs, BaseVersion: c.Base, Version: c.Base, Stopped: out.Stopped,
	}
	if out.Stopped == "" && len(c.Changes) > 0 {
		c.log = &row
		v, changes, err := s.Apply(ctx, c)
		if err == nil {
			out.Version, out.Changes = v, changes
			if row.Seq != 0 { // recorded with the version
				return nil
			}
			// Its changes changed nothing after all: no version.
			if err := s.logCommand(ctx, s.w, c.Workspace, &row); err != nil {
				s.ledgerLost(c.Workspace, err)
			}
			return nil
		}
		row.Error = truncate(err.Error(), 1024)
		if lerr := s.logCommand(ctx, s.w, c.Workspace, &row); lerr != nil {
			s.ledgerLost(c.Workspace, lerr)
		}
		return err
	}
	if err := s.logCommand(ctx, s.w, c.Workspace, &row); err != nil {
		// The command ran and its output is the caller's: a ledger that
		// cannot be written is said in the daemon's log, not in place of
		// the output.
		s.ledgerLost(c.Workspace, err)
	}
	return nil
}

func (s *Store) ledgerLost(ws string, err error) {
	if s.Logger != nil {
		s.Logger.Warn("workspace ledger entry lost", "workspace", ws, "err", err)
	}
}

// logCommand inserts one ledger row, and now and then cuts the
// workspace's ledger back to its last ledgerKeep rows.
func (s *Store) logCommand(ctx context.Context, q execer, ws string, c *api.WorkspaceCommand) error {
	res, err := q.ExecContext(ctx, `INSERT INTO commands (workspace, at, caller, executor, reason, command, exit_code, duration_us, base, version, stopped, error)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`, ws, c.At.UnixNano(), c.Caller, c.Executor, truncate(c.Reason, 1024), truncate(c.Command, 4096),
		c.ExitCode, int64(c.DurationMs*1000), c.BaseVersion, c.Version, c.Stopped, c.Error)
	if err != nil {
		return fmt.Errorf("workspaces: record a command in the ledger of %s: %w", ws, err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	c.Seq = seq
	if seq%ledgerPruneEvery == 0 {
		if _, err := q.ExecContext(ctx, `DELETE FROM commands WHERE workspace = ?1 AND seq <=
			(SELECT seq FROM commands WHERE workspace = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)`, ws, ledgerKeep); err != nil {
			return fmt.Errorf("workspaces: cut back the ledger of %s: %w", ws, err)
		}
	}
	return nil
}

// Ledger lists a workspace's ledger entries after seq after, oldest
// first, at most limit (MaxLedgerPage when <= 0 or above it); next is
// the seq to ask after for more, 0 when there are none.
func (s *Store) Ledger(ctx context.Context, id string, after int64, limit int) (entries []api.WorkspaceCommand, next int64, err error) {
	if limit <= 0 || limit > MaxLedgerPage {
		limit = MaxLedgerPage
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, at, caller, executor, reason, command, exit_code, duration_us, base, version, stopped, error
		FROM commands WHERE workspace = ? AND seq > ? ORDER BY seq LIMIT ?`, id, after, limit+1)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	entries = []api.WorkspaceCommand{}
	for rows.Next() {
		var c api.WorkspaceCommand
		var at, us int64
		if err := rows.Scan(&c.Seq, &at, &c.Caller, &c.Executor, &c.Reason, &c.Command, &c.ExitCode, &us, &c.BaseVersion, &c.Version, &c.Stopped, &c.Error); err != nil {
			return nil, 0, err
		}
		c.At, c.DurationMs = time.Unix(0, at).UTC(), float64(us)/1000
		entries = append(entries, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(entries) > limit {
		entries = entries[:limit]
		next = entries[limit-1].Seq
	}
	return entries, next, nil
}

// logInTx records c.log, when set, in Apply's transaction as the
// command that made version (its Seq set tells finish it was).
func (s *Store) logInTx(ctx context.Context, tx *sql.Tx, c Commit, version int64) error {
	if c.log == nil {
		return nil
	}
	c.log.Version = version
	return s.logCommand(ctx, tx, c.Workspace, c.log)
}

// changesOf is the changes a finished Tree holds, none when the command
// was stopped (nothing of it lands).
func changesOf(tree *vfs.Tree, stopped string) []vfs.Change {
	if stopped != "" || !tree.Changed() {
		return nil
	}
	return tree.Changes()
}
