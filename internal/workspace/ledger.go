package workspace

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
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
// own transaction when one is made, else through the ledger's queue
// (queue). out is the command's result; its Version and Changes are set
// from what landed. c names the command (its Changes are the changes).
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
			if row.Seq == 0 { // its changes changed nothing after all: no version
				s.queue(c.Workspace, row)
			}
			return nil
		}
		row.Error = truncate(err.Error(), 1024)
		s.queue(c.Workspace, row)
		return err
	}
	s.queue(c.Workspace, row)
	return nil
}

// The ledger's queue: a command that made no version is recorded by a
// writer that gathers what arrives within ledgerDelay into one
// transaction, so a read-only command does not pay a write of its own
// (a transaction costs about as much as the command). What is queued
// is written within ledgerDelay, before any read of the ledger, and at
// Close; a daemon killed in between loses that much of it (the
// versions, and the entries of the commands that made them, are not
// queued).
const ledgerDelay = 20 * time.Millisecond

type queuedRow struct {
	ws  string
	row api.WorkspaceCommand
}

type ledgerQueue struct {
	mu   sync.Mutex
	rows []queuedRow
	// flushing serialises flushes, so rows land in the order queued.
	flushing sync.Mutex
	wake     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

// startLedger starts the ledger's writer.
func (s *Store) startLedger() {
	s.lq = &ledgerQueue{wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.lq.stopped)
		for {
			select {
			case <-s.lq.stop:
				s.flushLedger(context.Background())
				return
			case <-s.lq.wake:
			}
			select {
			case <-s.lq.stop:
			case <-time.After(ledgerDelay):
			}
			s.flushLedger(context.Background())
		}
	}()
}

// stopLedger writes what is queued and ends the writer.
func (s *Store) stopLedger() {
	if s.lq == nil {
		return
	}
	s.lq.stopOnce.Do(func() { close(s.lq.stop) })
	<-s.lq.stopped
}

// queue hands a ledger row to the writer.
func (s *Store) queue(ws string, row api.WorkspaceCommand) {
	s.lq.mu.Lock()
	s.lq.rows = append(s.lq.rows, queuedRow{ws, row})
	s.lq.mu.Unlock()
	select {
	case s.lq.wake <- struct{}{}:
	default:
	}
}

// takeQueued takes the queued rows (the writer connection held).
func (s *Store) takeQueued() []queuedRow {
	s.lq.mu.Lock()
	defer s.lq.mu.Unlock()
	rows := s.lq.rows
	s.lq.rows = nil
	return rows
}

// flushLedger writes the queued rows in one transaction. The rows are
// taken once the transaction holds the database's one writer connection:
// a version being committed then is over, and a version to come starts
// after them, so rows queued before a version always land before it
// (logInTx takes them the same way when it holds the connection first).
func (s *Store) flushLedger(ctx context.Context) {
	s.lq.flushing.Lock()
	defer s.lq.flushing.Unlock()
	s.lq.mu.Lock()
	n := len(s.lq.rows)
	s.lq.mu.Unlock()
	if n == 0 {
		return
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		// Still queued: the next flush, a read or Close tries again.
		s.ledgerLost("", fmt.Errorf("%d entries not written yet: %w", n, err))
		return
	}
	defer tx.Rollback()
	rows := s.takeQueued()
	if len(rows) == 0 {
		return
	}
	err = func() error {
		for i := range rows {
			if err := s.logCommand(ctx, tx, rows[i].ws, &rows[i].row); err != nil {
				return err
			}
		}
		return tx.Commit()
	}()
	if err != nil {
		// The commands ran and their output was answered: a ledger that
		// cannot be written is said in the daemon's log.
		s.ledgerLost(rows[0].ws, fmt.Errorf("%d entries: %w", len(rows), err))
	}
}

func (s *Store) ledgerLost(ws string, err error) {
	if s.Logger != nil {
		s.Logger.Warn("workspace ledger entry lost", "workspace", ws, "err", err)
	}
}

// logCommand inserts one ledger row, and now and then cuts the
// workspace's ledger back to its last ledgerKeep rows.
func (s *Store) logCommand(ctx context.Context, q execer, ws string, c *api.WorkspaceCommand) error {
	// A row queued for a workspace removed since is dropped with it.
	res, err := q.ExecContext(ctx, `INSERT INTO commands (workspace, at, caller, executor, reason, command, exit_code, duration_us, base, version, stopped, error)
		SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12 WHERE EXISTS (SELECT 1 FROM workspaces WHERE id = ?1)`,
		ws, c.At.UnixNano(), c.Caller, c.Executor, truncate(c.Reason, 1024), truncate(c.Command, 4096),
		c.ExitCode, int64(c.DurationMs*1000), c.BaseVersion, c.Version, c.Stopped, c.Error)
	if err != nil {
		return fmt.Errorf("workspaces: record a command in the ledger of %s: %w", ws, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	c.Seq = seq
	// Counted per workspace, so that one whose entries interleave with
	// another's is cut back as often.
	s.mu.Lock()
	s.ledgerN[ws]++
	n := s.ledgerN[ws]
	s.mu.Unlock()
	if n%ledgerPruneEvery == 0 {
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
	s.flushLedger(ctx) // what was queued is read too
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
// command that made version (its Seq set tells finish it was), after
// the rows queued before it, so the ledger keeps the order the commands
// ended in: the transaction holds the one writer connection, so no flush
// holds rows it has taken (flushLedger takes them only once it has the
// connection). It returns the queued rows it took: should the
// transaction not commit, Apply gives them back (requeue).
func (s *Store) logInTx(ctx context.Context, tx *sql.Tx, c Commit, version int64) ([]queuedRow, error) {
	if c.log == nil {
		return nil, nil
	}
	rows := s.takeQueued()
	for i := range rows {
		if err := s.logCommand(ctx, tx, rows[i].ws, &rows[i].row); err != nil {
			return rows, err
		}
	}
	c.log.Version = version
	return rows, s.logCommand(ctx, tx, c.Workspace, c.log)
}

// requeue puts back rows a transaction that did not commit had taken,
// ahead of what was queued since.
func (s *Store) requeue(rows []queuedRow) {
	if len(rows) == 0 {
		return
	}
	for i := range rows {
		rows[i].row.Seq = 0
	}
	s.lq.mu.Lock()
	s.lq.rows = append(rows, s.lq.rows...)
	s.lq.mu.Unlock()
	select {
	case s.lq.wake <- struct{}{}:
	default:
	}
}

// changesOf is the changes a finished Tree holds, none when the command
// was stopped (nothing of it lands).
func changesOf(tree *vfs.Tree, stopped string) []vfs.Change {
	if stopped != "" || !tree.Changed() {
		return nil
	}
	return tree.Changes()
}
