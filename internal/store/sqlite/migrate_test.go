package sqlite

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// rawDB opens path as a plain single-connection pool, for looking at and
// tampering with a database the way an older or newer binary would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := openDB(path, true)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

type appliedRow struct {
	version int
	name    string
}

func applied(t *testing.T, db *sql.DB) []appliedRow {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []appliedRow
	for rows.Next() {
		var r appliedRow
		if err := rows.Scan(&r.version, &r.name); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	err := db.QueryRowContext(t.Context(),
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, name).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestEmbeddedMigrations(t *testing.T) {
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Fatalf("found %d embedded migrations, want at least 2", len(ms))
	}
	for i, m := range ms {
		if m.version != i+1 || strings.TrimSpace(m.sql) == "" {
			t.Errorf("migration %d: version %d name %q, %d bytes of SQL", i, m.version, m.name, len(m.sql))
		}
	}
}

func TestMigrateFreshAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paddock.db")
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db := rawDB(t, path)
	first := applied(t, db)
	if len(first) != len(ms) {
		t.Fatalf("fresh database records %v, want all %d migrations", first, len(ms))
	}
	for i, r := range first {
		if r.version != ms[i].version || r.name != ms[i].name {
			t.Errorf("row %d = %+v, want %d %s", i, r, ms[i].version, ms[i].name)
		}
	}
	for _, table := range []string{"sandboxes", "api_keys", "sandbox_state_changes"} {
		if !tableExists(t, db, table) {
			t.Errorf("table %s missing after migration", table)
		}
	}

	// Reopening applies nothing twice; a second run of 0001 would fail on
	// CREATE TABLE, so success alone shows it.
	openAt(t, path)
	if again := applied(t, db); len(again) != len(first) {
		t.Errorf("after reopen: %v, want %v", again, first)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paddock.db")
	s, err := Open(t.Context(), path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	db := rawDB(t, path)
	if _, err := db.ExecContext(t.Context(),
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = Open(t.Context(), path, testLogger(t))
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Open of a newer schema: %v, want ErrFailedPrecondition", err)
	}
	for _, want := range []string{"999", "newer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// An older binary's database gains exactly the migrations it lacks.
func TestMigrateIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paddock.db")
	db := rawDB(t, path)
	ctx := t.Context()
	v1 := migration{version: 1, name: "0001_a.sql", sql: `CREATE TABLE a (x INTEGER) STRICT; INSERT INTO a VALUES (1);`}
	v2 := migration{version: 2, name: "0002_b.sql", sql: `CREATE TABLE b (y TEXT) STRICT; INSERT INTO a VALUES (2);`}

	if err := migrate(ctx, db, []migration{v1}, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, db, []migration{v1, v2}, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, db, []migration{v1, v2}, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM a`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("table a has %d rows, want 2: a migration ran more or less than once", n)
	}
	if got := applied(t, db); len(got) != 2 || !tableExists(t, db, "b") {
		t.Errorf("applied = %v; table b exists = %v", got, tableExists(t, db, "b"))
	}
	// The older binary now sees a newer database and stops.
	if err := migrate(ctx, db, []migration{v1}, testLogger(t)); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("older binary on newer schema: %v, want ErrFailedPrecondition", err)
	}
}

// A failing migration leaves no trace: neither its partial changes nor a
// record that it ran.
func TestMigrateFailureRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paddock.db")
	db := rawDB(t, path)
	ctx := t.Context()
	good := migration{version: 1, name: "0001_good.sql", sql: `CREATE TABLE good (x INTEGER) STRICT;`}
	bad := migration{version: 2, name: "0002_bad.sql", sql: `CREATE TABLE half (x INTEGER) STRICT; THIS IS NOT SQL;`}

	err := migrate(ctx, db, []migration{good, bad}, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "0002_bad.sql") {
		t.Fatalf("migrate with a bad migration: %v, want an error naming it", err)
	}
	if tableExists(t, db, "half") {
		t.Error("the failed migration's first statement was kept")
	}
	if got := applied(t, db); len(got) != 1 || got[0].version != 1 {
		t.Errorf("applied = %v, want only version 1", got)
	}
	fixed := migration{version: 2, name: "0002_bad.sql", sql: `CREATE TABLE half (x INTEGER) STRICT;`}
	if err := migrate(ctx, db, []migration{good, fixed}, testLogger(t)); err != nil {
		t.Fatalf("retry after fixing: %v", err)
	}
}

func TestLoadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []int
		wantErr bool
	}{
		{"ordered", fstest.MapFS{"0002_b.sql": file("B"), "0001_a.sql": file("A")}, []int{1, 2}, false},
		{"other files ignored", fstest.MapFS{"0001_a.sql": file("A"), "README.md": file("x"), "sub/0002_x.sql": file("x")}, []int{1}, false},
		{"empty", fstest.MapFS{}, nil, false},
		{"gap", fstest.MapFS{"0001_a.sql": file("A"), "0003_c.sql": file("C")}, nil, true},
		{"duplicate number", fstest.MapFS{"0001_a.sql": file("A"), "0001_b.sql": file("B")}, nil, true},
		{"starts at two", fstest.MapFS{"0002_b.sql": file("B")}, nil, true},
		{"zero", fstest.MapFS{"0000_z.sql": file("Z")}, nil, true},
		{"no underscore", fstest.MapFS{"0001.sql": file("A")}, nil, true},
		{"short number", fstest.MapFS{"1_a.sql": file("A")}, nil, true},
		{"not a number", fstest.MapFS{"000x_a.sql": file("A")}, nil, true},
		{"signed number", fstest.MapFS{"+001_a.sql": file("A")}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := loadMigrations(tc.fsys)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("loadMigrations = %v, want an error", ms)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("versions = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("versions = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
