// Package workspace keeps workspaces: named filesystems whose canonical
// copy is the daemon's, in SQLite, with every change recorded as a version
// made by one command, and runs commands on them through executors
// (run.go; the shell executor is package wsh, the files a command sees
// package vfs).
//
// The canonical copy is a SQLite database of its own (workspaces.db under
// the daemon's state directory), not the snapshot store's object pool: a
// command's changes must land whole or not at all, and one SQLite
// transaction covers its new contents, its entries and its history row,
// where the object pool would need a journal of its own. File contents are
// deduplicated by SHA-256 across all versions and workspaces (table
// blobs). It is a file apart from the daemon's database so that bulk
// contents do not grow that database and its backups, and so that a busy
// workspace does not queue sandbox state writes behind its own.
//
// History: an entry row holds one path's state from the version that made
// it (since) until the version that replaced or removed it (until, NULL
// while current), so any version's files are the rows alive at it, and a
// diff or rollback is a comparison of two such sets.
package workspace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// schemaVersion is the schema this binary writes (PRAGMA user_version):
// 2 added workspaces.oldest (history pruned below it), 3 the ledger
// (table commands, ledger.go).
const schemaVersion = 3

const schema = `
CREATE TABLE IF NOT EXISTS workspaces (
	id          TEXT PRIMARY KEY,
	name        TEXT NOT NULL,
	owner       TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	head        INTEGER NOT NULL,
	bytes       INTEGER NOT NULL,
	files       INTEGER NOT NULL,
	max_bytes   INTEGER NOT NULL,
	max_files   INTEGER NOT NULL,
	oldest      INTEGER NOT NULL DEFAULT 0,
	UNIQUE (owner, name)
);
CREATE TABLE IF NOT EXISTS blobs (
	hash TEXT PRIMARY KEY,
	size INTEGER NOT NULL,
	data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
	workspace TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	path      TEXT NOT NULL,
	since     INTEGER NOT NULL,
	until     INTEGER,
	dir       INTEGER NOT NULL,
	mode      INTEGER NOT NULL,
	size      INTEGER NOT NULL,
	mtime     INTEGER NOT NULL,
	hash      TEXT,
	PRIMARY KEY (workspace, path, since)
);
CREATE INDEX IF NOT EXISTS entries_alive ON entries (workspace, until);
CREATE INDEX IF NOT EXISTS entries_hash ON entries (hash);
CREATE TABLE IF NOT EXISTS versions (
	workspace  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
	version    INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	caller     TEXT NOT NULL,
	executor   TEXT NOT NULL,
	command    TEXT NOT NULL,
	exit_code  INTEGER NOT NULL,
	added      INTEGER NOT NULL,
	modified   INTEGER NOT NULL,
	removed    INTEGER NOT NULL,
	PRIMARY KEY (workspace, version)
);
`

// Store is the workspaces' database.
type Store struct {
	// w is the one writer connection (writes queue in Go, not on SQLite's
	// lock); r the readers', which WAL lets run beside it.
	w, r *sql.DB

	// heads caches each workspace's current entries, by id: a version's
	// entries never change, so the cache is right until the next commit,
	// which drops it.
	mu    sync.Mutex
	heads map[string]headEntries
	// stored holds, by workspace id, an upper bound of the contents its
	// history held at a version (pruneHistory), so that a commit well
	// under the bound does not sum every content of the workspace.
	stored map[string]storedBound
	blobs  *blobCache
	lq     *ledgerQueue
	// ledgerN counts each workspace's ledger inserts since the store
	// opened (logCommand cuts its ledger back every ledgerPruneEvery).
	ledgerN map[string]int64

	// JSCommand starts the js executor's child (wjs.Options.Command);
	// nil: this store runs no JavaScript. Set before the first Run.
	JSCommand []string
	// Logger, when set, hears of ledger entries that could not be
	// written. Set before the first Run.
	Logger *slog.Logger
}

type storedBound struct {
	version, bytes int64
}

type headEntries struct {
	version int64
	index   *vfs.Index
}

// Open opens (creating if needed) the workspace database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("workspaces: resolve database path: %w", err)
	}
	w, err := openDB(abs, true)
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	var v int
	if err := w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		w.Close()
		return nil, fmt.Errorf("workspaces: read schema version of %s: %w", abs, err)
	}
	if v > schemaVersion {
		w.Close()
		return nil, fmt.Errorf("workspaces: %s has schema version %d, newer than this binary's %d: run the newer paddock", abs, v, schemaVersion)
	}
	upgrade := ""
	if v == 1 {
		upgrade = "ALTER TABLE workspaces ADD COLUMN oldest INTEGER NOT NULL DEFAULT 0;"
	}
	if _, err := w.ExecContext(ctx, schema+ledgerSchema+upgrade+fmt.Sprintf("PRAGMA user_version = %d;", schemaVersion)); err != nil {
		w.Close()
		return nil, fmt.Errorf("workspaces: create schema in %s: %w", abs, err)
	}
	r, err := openDB(abs, false)
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	s := &Store{w: w, r: r, heads: map[string]headEntries{}, stored: map[string]storedBound{}, ledgerN: map[string]int64{}, blobs: newBlobCache(64 << 20)}
	s.startLedger()
	return s, nil
}

// openDB opens one pool with the daemon database's settings.
func openDB(abs string, writer bool) (*sql.DB, error) {
	db, err := sqlite.OpenDB(abs, writer)
	if err != nil {
		return nil, fmt.Errorf("workspaces: %w", err)
	}
	return db, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.stopLedger()
	return errors.Join(s.r.Close(), s.w.Close())
}

// Record is a workspace as the store keeps it.
type Record struct {
	ID, Name, Owner      string
	CreatedAt, UpdatedAt time.Time
	Head                 int64
	Bytes, Files         int64
	MaxBytes, MaxFiles   int64
	// Oldest is the oldest version kept (0: all of them); earlier ones
	// were pruned (pruneHistory).
	Oldest int64
}

// API is r as the API shows it.
func (r Record) API() api.Workspace {
	return api.Workspace{
		ID: r.ID, Name: r.Name, CreatedBy: r.Owner, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Version: r.Head, Bytes: r.Bytes, Files: r.Files, MaxBytes: r.MaxBytes, MaxFiles: r.MaxFiles, OldestVersion: r.Oldest,
	}
}

const recordCols = "id, name, owner, created_at, updated_at, head, bytes, files, max_bytes, max_files, oldest"

func scanRecord(row interface{ Scan(...any) error }) (Record, error) {
	var r Record
	var created, updated int64
	err := row.Scan(&r.ID, &r.Name, &r.Owner, &created, &updated, &r.Head, &r.Bytes, &r.Files, &r.MaxBytes, &r.MaxFiles, &r.Oldest)
	r.CreatedAt, r.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return r, err
}

// Create records a new, empty workspace at version 0; a name its owner
// already holds is ErrConflict.
func (s *Store) Create(ctx context.Context, r Record) (Record, error) {
	now := time.Now().UTC()
	r.CreatedAt, r.UpdatedAt, r.Head, r.Bytes, r.Files = now, now, 0, 0, 0
	_, err := s.w.ExecContext(ctx, "INSERT INTO workspaces ("+recordCols+") VALUES (?,?,?,?,?,0,0,0,?,?,0)",
		r.ID, r.Name, r.Owner, now.UnixNano(), now.UnixNano(), r.MaxBytes, r.MaxFiles)
	if isUnique(err) {
		return Record{}, fmt.Errorf("you already have a workspace named %q: %w", r.Name, errdefs.ErrConflict)
	}
	if err != nil {
		return Record{}, fmt.Errorf("workspaces: create %s: %w", r.Name, err)
	}
	return r, nil
}

func isUnique(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// Get returns the workspace id (ErrNotFound when there is none).
func (s *Store) Get(ctx context.Context, id string) (Record, error) {
	r, err := scanRecord(s.r.QueryRowContext(ctx, "SELECT "+recordCols+" FROM workspaces WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, errNotFound(id)
	}
	return r, err
}

// Named returns every owner's workspace named name.
func (s *Store) Named(ctx context.Context, name string) ([]Record, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+recordCols+" FROM workspaces WHERE name = ?", name)
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

func errNotFound(ref string) error {
	return fmt.Errorf("workspace %q not found: %w", ref, errdefs.ErrNotFound)
}

// List returns every workspace, oldest first.
func (s *Store) List(ctx context.Context) ([]Record, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+recordCols+" FROM workspaces ORDER BY created_at, id")
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

func scanRecords(rows *sql.Rows) ([]Record, error) {
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Delete removes a workspace with its history, and the contents no other
// workspace's history holds.
func (s *Store) Delete(ctx context.Context, id string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var hashes []string
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT hash FROM entries WHERE workspace = ? AND hash IS NOT NULL", id)
	if err != nil {
		return err
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return err
		}
		hashes = append(hashes, h)
	}
	rows.Close()
	res, err := tx.ExecContext(ctx, "DELETE FROM workspaces WHERE id = ?", id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errNotFound(id)
	}
	for _, h := range hashes {
		if _, err := tx.ExecContext(ctx, "DELETE FROM blobs WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM entries WHERE hash = ?)", h, h); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.heads, id)
	delete(s.stored, id)
	delete(s.ledgerN, id)
	s.mu.Unlock()
	return nil
}

// Head returns the workspace's current version and its entries, indexed
// (shared: read-only).
func (s *Store) Head(ctx context.Context, id string) (int64, *vfs.Index, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	return s.headOf(ctx, r)
}

// headOf is Head for a record just read (its Head is the version).
func (s *Store) headOf(ctx context.Context, r Record) (int64, *vfs.Index, error) {
	id := r.ID
	s.mu.Lock()
	h, ok := s.heads[id]
	s.mu.Unlock()
	if ok && h.version == r.Head {
		return h.version, h.index, nil
	}
	entries, err := s.entriesAt(ctx, s.r, id, r.Head)
	if err != nil {
		return 0, nil, err
	}
	ix, err := vfs.NewIndex(entries)
	if err != nil {
		return 0, nil, fmt.Errorf("workspaces: version %d of %s: %w", r.Head, id, err)
	}
	s.remember(id, r.Head, ix)
	return r.Head, ix, nil
}

// remember caches a version's index as the workspace's head, unless a
// newer one is cached already.
func (s *Store) remember(id string, version int64, ix *vfs.Index) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.heads[id]; !ok || cur.version < version {
		s.heads[id] = headEntries{version: version, index: ix}
	}
}

// advance makes the cached head of version base into that of next by
// applying changes, so the next command does not read every entry again.
func (s *Store) advance(id string, base, next int64, changes []vfs.Change) {
	s.mu.Lock()
	h, ok := s.heads[id]
	delete(s.heads, id)
	s.mu.Unlock()
	if !ok || h.version != base {
		return
	}
	files := make([]vfs.Entry, 0, len(changes))
	for _, ch := range changes {
		if ch.Removed || ch.Dir {
			break
		}
		// As the database gives it back: nanoseconds, UTC.
		ch.ModTime = time.Unix(0, ch.ModTime.UnixNano()).UTC()
		files = append(files, ch.Entry)
	}
	if len(files) == len(changes) {
		if ix, ok := h.index.WithFiles(files); ok {
			s.remember(id, next, ix)
			return
		}
	}
	entries := slices.Clone(h.index.Entries())
	at := make(map[string]int, len(entries))
	for i, e := range entries {
		at[e.Path] = i
	}
	gone := map[int]bool{}
	for _, ch := range changes {
		// As the database gives it back: nanoseconds, UTC.
		ch.ModTime = time.Unix(0, ch.ModTime.UnixNano()).UTC()
		i, had := at[ch.Path]
		switch {
		case ch.Removed && had:
			gone[i] = true
		case ch.Removed:
		case had:
			entries[i] = ch.Entry
			delete(gone, i)
		default:
			at[ch.Path] = len(entries)
			entries = append(entries, ch.Entry)
		}
	}
	kept := entries[:0]
	for i, e := range entries {
		if !gone[i] {
			kept = append(kept, e)
		}
	}
	ix, err := vfs.NewIndex(kept)
	if err != nil {
		return // read from the database next time
	}
	s.remember(id, next, ix)
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// entriesAt lists the workspace's entries alive at version.
func (s *Store) entriesAt(ctx context.Context, q querier, id string, version int64) ([]vfs.Entry, error) {
	rows, err := q.QueryContext(ctx, `SELECT path, dir, mode, size, mtime, COALESCE(hash, '') FROM entries
		WHERE workspace = ? AND since <= ? AND (until IS NULL OR until > ?) ORDER BY path`, id, version, version)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []vfs.Entry
	for rows.Next() {
		var e vfs.Entry
		var mode uint32
		var mtime int64
		if err := rows.Scan(&e.Path, &e.Dir, &mode, &e.Size, &mtime, &e.Hash); err != nil {
			return nil, err
		}
		e.Mode, e.ModTime = fs.FileMode(mode).Perm(), time.Unix(0, mtime).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// Content reads a content by hash (vfs.Content), through a bounded cache.
func (s *Store) Content(hash string) ([]byte, error) {
	if b, ok := s.blobs.get(hash); ok {
		return b, nil
	}
	var b []byte
	err := s.r.QueryRow("SELECT data FROM blobs WHERE hash = ?", hash).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("workspaces: content %s is missing from the database", hash)
	}
	if err != nil {
		return nil, err
	}
	s.blobs.put(hash, b)
	return b, nil
}

// Commit is one command's changes and what to record of it.
type Commit struct {
	Workspace string
	// Base is the version the command saw.
	Base     int64
	Changes  []vfs.Change
	Caller   string
	Executor string
	Command  string
	ExitCode int
	// log, when set, is recorded in the ledger in the version's
	// transaction (finish).
	log *api.WorkspaceCommand
}

// ErrConflict's text names the path a concurrent command changed.
func errConflict(path string, base int64) error {
	return fmt.Errorf("%q was changed by another command after version %d, which this command saw; nothing of this command was kept: run it again: %w",
		path, base, errdefs.ErrConflict)
}

// Apply lands c's changes as one new version, in one transaction, and
// returns that version with what changed. Commands run isolated, each on
// the version it started from: a change to a path that another command
// changed since c.Base, or under a directory it removed, is ErrConflict
// and nothing lands. The workspace's quota is checked on the result.
func (s *Store) Apply(ctx context.Context, c Commit) (int64, []api.WorkspaceChange, error) {
	if len(c.Changes) == 0 {
		return c.Base, nil, nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	defer tx.Rollback()
	r, err := scanRecord(tx.QueryRowContext(ctx, "SELECT "+recordCols+" FROM workspaces WHERE id = ?", c.Workspace))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, errNotFound(c.Workspace)
	}
	if err != nil {
		return 0, nil, err
	}
	next := r.Head + 1
	bytes, files := r.Bytes, r.Files
	var out []api.WorkspaceChange
	for _, ch := range c.Changes {
		if r.Head != c.Base {
			if err := checkUntouched(ctx, tx, c.Workspace, ch.Path, c.Base); err != nil {
				return 0, nil, err
			}
		}
		var old struct {
			size int64
			dir  bool
		}
		err := tx.QueryRowContext(ctx, "SELECT size, dir FROM entries WHERE workspace = ? AND path = ? AND until IS NULL", c.Workspace, ch.Path).
			Scan(&old.size, &old.dir)
		had := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, nil, err
		}
		if had {
			if _, err := tx.ExecContext(ctx, "UPDATE entries SET until = ? WHERE workspace = ? AND path = ? AND until IS NULL", next, c.Workspace, ch.Path); err != nil {
				return 0, nil, err
			}
			bytes -= old.size
			files--
		}
		if ch.Removed {
			if had {
				out = append(out, api.WorkspaceChange{Path: ch.Path, Kind: api.ChangeRemoved, Dir: old.dir})
			}
			continue
		}
		if err := s.putEntry(ctx, tx, c.Workspace, next, ch); err != nil {
			return 0, nil, err
		}
		bytes += ch.Size
		files++
		kind := api.ChangeAdded
		if had {
			kind = api.ChangeModified
		}
		out = append(out, api.WorkspaceChange{Path: ch.Path, Kind: kind, Dir: ch.Dir})
	}
	if r.Head != c.Base {
		if err := checkParents(ctx, tx, c.Workspace, c.Changes); err != nil {
			return 0, nil, err
		}
	}
	if err := checkQuota(r, bytes, files); err != nil {
		return 0, nil, err
	}
	// At most what the history's contents grow by: the size of every file
	// the version gets anew, whether its content is new or already held
	// (by this workspace or, deduplicated, by another).
	var brought int64
	for _, ch := range c.Changes {
		if !ch.Removed && !ch.Dir {
			brought += ch.Size
		}
	}
	var stored int64 = -1
	if brought > 0 {
		if stored, err = s.pruneHistory(ctx, tx, r, brought); err != nil {
			return 0, nil, err
		}
	}
	if len(out) == 0 {
		return r.Head, nil, nil
	}
	var added, modified, removed int
	for _, ch := range out {
		switch ch.Kind {
		case api.ChangeAdded:
			added++
		case api.ChangeModified:
			modified++
		default:
			removed++
		}
	}
	now := time.Now().UTC().UnixNano()
	if _, err := tx.ExecContext(ctx, `INSERT INTO versions (workspace, version, created_at, caller, executor, command, exit_code, added, modified, removed)
		VALUES (?,?,?,?,?,?,?,?,?,?)`, c.Workspace, next, now, c.Caller, c.Executor, truncate(c.Command, 4096), c.ExitCode, added, modified, removed); err != nil {
		return 0, nil, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE workspaces SET head = ?, bytes = ?, files = ?, updated_at = ? WHERE id = ?",
		next, bytes, files, now, c.Workspace); err != nil {
		return 0, nil, err
	}
	taken, err := s.logInTx(ctx, tx, c, next)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		s.requeue(taken)
		if c.log != nil {
			c.log.Seq = 0
		}
		return 0, nil, fmt.Errorf("workspaces: commit version %d of %s: %w", next, c.Workspace, err)
	}
	s.advance(c.Workspace, r.Head, next, c.Changes)
	if stored >= 0 {
		s.mu.Lock()
		s.stored[c.Workspace] = storedBound{version: next, bytes: stored}
		s.mu.Unlock()
	}
	return next, out, nil
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// putEntry inserts ch's entry as of version, with its content when the
// database lacks it.
func (s *Store) putEntry(ctx context.Context, tx execer, ws string, version int64, ch vfs.Change) error {
	var hash any
	if !ch.Dir {
		hash = ch.Hash
		if ch.Data != nil {
			if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO blobs (hash, size, data) VALUES (?,?,?)", ch.Hash, len(ch.Data), ch.Data); err != nil {
				return err
			}
		} else {
			var one int
			if err := tx.QueryRowContext(ctx, "SELECT 1 FROM blobs WHERE hash = ?", ch.Hash).Scan(&one); err != nil {
				return fmt.Errorf("workspaces: content %s of %s is not in the database: %w", ch.Hash, ch.Path, err)
			}
		}
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO entries (workspace, path, since, until, dir, mode, size, mtime, hash) VALUES (?,?,?,NULL,?,?,?,?,?)",
		ws, ch.Path, version, ch.Dir, uint32(ch.Mode.Perm()), ch.Size, ch.ModTime.UnixNano(), hash)
	return err
}

// checkUntouched refuses a change to path when a version after base
// changed it.
func checkUntouched(ctx context.Context, tx execer, ws, path string, base int64) error {
	var one int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM entries WHERE workspace = ? AND path = ? AND (since > ? OR until > ?) LIMIT 1",
		ws, path, base, base).Scan(&one)
	switch {
	case err == nil:
		return errConflict(path, base)
	case errors.Is(err, sql.ErrNoRows):
		return nil
	}
	return err
}

// checkParents refuses changes that leave an entry without its directory
// (a concurrent command removed it).
func checkParents(ctx context.Context, tx execer, ws string, changes []vfs.Change) error {
	for _, ch := range changes {
		parent := filepath.ToSlash(filepath.Dir(ch.Path))
		if ch.Removed || parent == "." {
			continue
		}
		var dir bool
		err := tx.QueryRowContext(ctx, "SELECT dir FROM entries WHERE workspace = ? AND path = ? AND until IS NULL", ws, parent).Scan(&dir)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && !dir) {
			return fmt.Errorf("directory %q of %q was removed or replaced by another command; nothing of this command was kept: run it again: %w",
				parent, ch.Path, errdefs.ErrConflict)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func checkQuota(r Record, bytes, files int64) error {
	if r.MaxBytes > 0 && bytes > r.MaxBytes {
		return fmt.Errorf("workspace %s would hold %d bytes, past its quota of %d; nothing of this command was kept: %w",
			r.Name, bytes, r.MaxBytes, errdefs.ErrResourceExhausted)
	}
	if r.MaxFiles > 0 && files > r.MaxFiles {
		return fmt.Errorf("workspace %s would hold %d files and directories, past its quota of %d; nothing of this command was kept: %w",
			r.Name, files, r.MaxFiles, errdefs.ErrResourceExhausted)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
