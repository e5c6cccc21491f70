package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCache keeps prepared statements for the store's hottest queries.
// The driver otherwise parses and plans the SQL text on every call, and on
// an exec or a state change that parsing was the larger part of the
// store's CPU time. A *sql.Stmt is prepared once per pooled connection and
// then reused; only fixed query texts are cached, so the map stays small.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[query]; ok {
		return s, nil
	}
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = s
	return s, nil
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for q, s := range c.m {
		errs = append(errs, s.Close())
		delete(c.m, q)
	}
	return errors.Join(errs...)
}

// readRow runs a cached read query on the reader pool.
func (st *Store) readRow(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	s, err := st.rs.get(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryRowContext(ctx, args...), nil
}

// Write statements are prepared when the store opens (prepareWrites):
// preparing one later on the writer pool would wait for its only
// connection, which the calling transaction holds.
const (
	qSandboxCreatedAt  = `SELECT created_at FROM sandboxes WHERE id = ?`
	qUpdateSandbox     = `UPDATE sandboxes SET name = ?, state = ?, error_reason = ?, image = ?, image_digest = ?, runtime = ?, resources = ?, env = ?, labels = ?, sleep_after_ns = ?, keep_alive = ?, timeout_ns = ?, updated_at = ?, last_activity_at = ?, snapshot_id = ?, snapshot_layers = ?, on_idle = ? WHERE id = ?`
	qSetSandboxOwner   = `UPDATE sandboxes SET key_id = ? WHERE id = ?`
	qInsertStateChange = `INSERT INTO sandbox_state_changes (sandbox_id, from_state, to_state, reason, at) VALUES (?, ?, ?, ?, ?)`
	qInsertLedgerEntry = `INSERT INTO ledger (sandbox_id, sandbox_name, kind, source, at, command, exit_code, duration_ns, path, note, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

var writeQueries = []string{qSandboxCreatedAt, qUpdateSandbox, qSetSandboxOwner, qInsertStateChange, qInsertLedgerEntry}

// prepareWrites prepares the cached write statements; it runs before any
// transaction can hold the writer connection.
func (c *stmtCache) prepareWrites(ctx context.Context) error {
	for _, q := range writeQueries {
		if _, err := c.get(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// lookup returns a statement prepared earlier, never preparing one.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

// txRow runs a query inside a write transaction, through its prepared
// statement when the store has one.
func (st *Store) txRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if s := st.ws.lookup(query); s != nil {
		return tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// txExec is txRow for statements that return no rows.
func (st *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if s := st.ws.lookup(query); s != nil {
		return tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}
