// Package sqlite is the embedded implementation of store.Store, on a single
// SQLite file through modernc.org/sqlite (pure Go, so the binary stays
// static). The schema is managed by the numbered migrations embedded from
// migrations/.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// busyTimeout bounds how long a connection waits on another process's lock
// (a second daemon, or an operator's sqlite3 shell) before giving up. Inside
// one process writes are serialised by the single writer connection, so the
// wait only matters across processes.
const busyTimeout = 10 * time.Second

// readConns is the size of the read pool. WAL lets readers run beside the
// writer, so a few connections keep list and get calls off the write queue.
const readConns = 4

// Store is a store.Store backed by one SQLite database file.
//
// Writes go through a pool of exactly one connection: database/sql queues
// writers in Go instead of letting them race for SQLite's write lock, which
// is what would otherwise surface as SQLITE_BUSY under concurrent use.
// Reads use a separate small pool that is query-only.
type Store struct {
	w   *sql.DB
	r   *sql.DB
	log *slog.Logger
	// Prepared statements of each pool (stmts.go).
	ws, rs *stmtCache
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and brings its schema
// up to date. It refuses a database whose schema is newer than this binary
// knows, since writing to it could corrupt what the newer version relies on.
// A nil logger discards.
func Open(ctx context.Context, path string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if path == "" {
		return nil, errdefs.Invalid("store: database path is empty")
	}
	if strings.ContainsRune(path, 0) {
		return nil, errdefs.Invalid("store: database path contains a NUL byte")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: resolve database path: %w", err)
	}
	ms, err := embeddedMigrations()
	if err != nil {
		return nil, err
	}

	w, err := openDB(abs, true)
	if err != nil {
		return nil, err
	}
	// One connection, never closed while idle: see Store.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	if err := migrate(ctx, w, ms, logger); err != nil {
		w.Close()
		return nil, err
	}

	r, err := openDB(abs, false)
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("store: open database for reading: %w", err)
	}
	st := &Store{w: w, r: r, log: logger, ws: newStmtCache(w), rs: newStmtCache(r)}
	if err := st.ws.prepareWrites(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("store: prepare statements: %w", err)
	}
	logger.Debug("store opened", "path", abs)
	return st, nil
}

// OpenDB opens the SQLite file abs (an absolute path) as one pool, with
// this package's settings (openDB): other databases of the daemon
// (workspaces) open theirs the same way.
func OpenDB(abs string, writer bool) (*sql.DB, error) {
	return openDB(abs, writer)
}

// openDB builds the DSN for one pool. Every connection gets its settings from
// the DSN because database/sql may open new connections at any time.
//
//   - journal_mode=WAL: readers do not block the writer nor it them.
//   - synchronous=NORMAL: in WAL mode this cannot corrupt the database; a
//     power loss can only drop the last transactions since the previous
//     checkpoint, and it saves an fsync on every commit. Losing a last
//     commit looks like a crash just before it, which reconcile on start
//     already handles, so that trade is the right one.
//   - foreign_keys: SQLite leaves them off per connection unless asked.
//   - _txlock=immediate: a write transaction takes the write lock at BEGIN,
//     so it can never fail half-way when upgrading from a read lock.
func openDB(abs string, writer bool) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("store: open database: %w", err)
	}
	return db, nil
}

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.rs.close(), s.ws.close(), s.r.Close(), s.w.Close())
}

// sqliteCode returns the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isUniqueViolation reports a duplicate primary key or unique index entry.
func isUniqueViolation(err error) bool {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return true
	}
	return false
}

// writeTx runs fn in one write transaction on the single writer connection.
func (s *Store) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin transaction: %w", ctxErr(ctx, err))
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", ctxErr(ctx, err))
	}
	return nil
}

// ctxErr prefers the context's error, so a cancelled call reports
// cancellation rather than whatever the driver made of the interruption.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// nanos encodes a time as unix nanoseconds, with the zero time as NULL.
func nanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// fromNanos is the inverse of nanos; times come back in UTC.
func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}
