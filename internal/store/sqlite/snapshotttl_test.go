package sqlite

import (
	"path/filepath"
	"testing"
	"time"
)

// TestMigrateSnapshotTTLBackfill: rows written before snapshots had a TTL
// column get the TTL their creation and expiry times tell, bounded, and
// those that never expire keep no TTL.
func TestMigrateSnapshotTTLBackfill(t *testing.T) {
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	before := -1
	for i, m := range ms {
		if m.name == "0009_snapshot_ttl.sql" {
			before = i
		}
	}
	if before < 0 {
		t.Fatal("migration 0009_snapshot_ttl.sql not found")
	}
	path := filepath.Join(t.TempDir(), "paddock.db")
	db := rawDB(t, path)
	ctx := t.Context()
	if err := migrate(ctx, db, ms[:before], testLogger(t)); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	rows := []struct {
		id               string
		created, expires any
		want             time.Duration
	}{
		{"default", created.UnixNano(), created.Add(30 * day).UnixNano(), 30 * day},
		{"fork", created.UnixNano(), created.Add(day).UnixNano(), day},
		{"never", created.UnixNano(), nil, 0},
		{"nocreated", nil, created.Add(day).UnixNano(), 30 * day},
		{"backwards", created.UnixNano(), created.Add(-time.Hour).UnixNano(), time.Second},
		{"huge", int64(0), created.Add(20 * 365 * day).UnixNano(), 10 * 365 * day},
	}
	for _, r := range rows {
		if _, err := db.ExecContext(ctx, `INSERT INTO snapshots (id, image_digest, layers, created_at, expires_at) VALUES (?, 'sha256:aa', '[{"digest":"sha256:01","size":1}]', ?, ?)`,
			r.id, r.created, r.expires); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrate(ctx, db, ms, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st := openAt(t, path)
	for _, r := range rows {
		got, err := st.GetSnapshot(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		if got.TTL != r.want {
			t.Errorf("%s: ttl %v, want %v", r.id, got.TTL, r.want)
		}
		if (got.TTL == 0) != got.ExpiresAt.IsZero() {
			t.Errorf("%s: ttl %v but expiry %v", r.id, got.TTL, got.ExpiresAt)
		}
	}
}
