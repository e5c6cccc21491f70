package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string // file name, kept in schema_migrations for operators
	sql     string
}

func embeddedMigrations() ([]migration, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return loadMigrations(sub)
}

// loadMigrations reads NNNN_description.sql files from the root of fsys. The
// numbers must run 1, 2, 3, ... without gaps, so that a missing or doubled
// file is caught when the binary is tested rather than on a user's database.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		v, err := migrationVersion(e.Name())
		if err != nil {
			return nil, err
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	// fs.ReadDir sorts by name, and the numbers are zero-padded to the same
	// width, so name order is version order; the check below proves it.
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("store: migration %s: expected version %d: %w", m.name, i+1, errdefs.ErrFailedPrecondition)
		}
	}
	return ms, nil
}

// migrationVersion parses the number in "0001_init.sql".
func migrationVersion(name string) (int, error) {
	num, _, ok := strings.Cut(name, "_")
	if !ok || len(num) != 4 || strings.Trim(num, "0123456789") != "" {
		return 0, fmt.Errorf("store: migration file %q is not named NNNN_description.sql: %w", name, errdefs.ErrFailedPrecondition)
	}
	v, err := strconv.Atoi(num)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("store: migration file %q has no positive number: %w", name, errdefs.ErrFailedPrecondition)
	}
	return v, nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
) STRICT`

// queryRower is what *sql.DB and *sql.Tx share for single-row queries.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion returns the highest migration recorded in the database.
func schemaVersion(ctx context.Context, q queryRower) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// migrate applies every migration in ms that the database lacks, each in its
// own transaction together with its schema_migrations row, so a failure
// leaves the database at the last complete version.
func migrate(ctx context.Context, db *sql.DB, ms []migration, logger *slog.Logger) error {
	if _, err := db.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("store: create schema_migrations: %w", ctxErr(ctx, err))
	}
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].version
	}
	// Checked before the loop too, for when there is nothing to apply.
	cur, err := schemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if cur > latest {
		return newerSchemaError(cur, latest)
	}
	for _, m := range ms {
		err := func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return fmt.Errorf("store: begin migration: %w", ctxErr(ctx, err))
			}
			defer tx.Rollback()
			// Read the version under the write lock, so two processes
			// opening the same new file cannot both apply a migration.
			cur, err := schemaVersion(ctx, tx)
			if err != nil {
				return err
			}
			if cur > latest {
				return newerSchemaError(cur, latest)
			}
			if cur >= m.version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("store: migration %s: %w", m.name, ctxErr(ctx, err))
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("store: record migration %s: %w", m.name, ctxErr(ctx, err))
			}
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("store: commit migration %s: %w", m.name, ctxErr(ctx, err))
			}
			logger.Info("applied schema migration", "version", m.version, "name", m.name)
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

func newerSchemaError(cur, latest int) error {
	return fmt.Errorf("store: database schema version %d is newer than this paddock supports (%d); use a newer paddock: %w",
		cur, latest, errdefs.ErrFailedPrecondition)
}
