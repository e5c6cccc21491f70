package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

var _ store.TemplateStore = (*Store)(nil)

// templateDoc is the JSON kept in templates.data.
type templateDoc struct {
	Spec        json.RawMessage `json:"spec"`
	Image       string          `json:"image"`
	ImageDigest string          `json:"image_digest"`
	Layers      []string        `json:"layers"`
	BuildID     string          `json:"build_id"`
	Owner       string          `json:"owner,omitempty"`
}

func checkRecordName(field, v string) error {
	if v == "" {
		return errdefs.Invalid("%s is empty", field)
	}
	return checkText(field, v, maxNameLen)
}

// PutTemplate inserts or replaces a template.
func (st *Store) PutTemplate(ctx context.Context, t *store.Template) error {
	if err := checkRecordName("template name", t.Name); err != nil {
		return err
	}
	spec, err := json.Marshal(t.Spec)
	if err != nil {
		return errdefs.Invalid("template spec cannot be encoded")
	}
	data, err := json.Marshal(templateDoc{Spec: spec, Image: t.Image, ImageDigest: t.ImageDigest, Layers: t.Layers, BuildID: t.BuildID, Owner: t.Owner})
	if err != nil {
		return errdefs.Invalid("template cannot be encoded")
	}
	ts := now()
	if t.CreatedAt.IsZero() {
		t.CreatedAt = ts
	}
	t.UpdatedAt = ts
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO templates (name, data, created_at, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
			t.Name, string(data), nanos(t.CreatedAt), nanos(t.UpdatedAt))
		if err != nil {
			return fmt.Errorf("store: put template %q: %w", t.Name, ctxErr(ctx, err))
		}
		return nil
	})
}

func scanTemplate(sc scanner) (*store.Template, error) {
	var (
		t                store.Template
		data             string
		created, updated sql.NullInt64
		spawned          sql.NullInt64
	)
	if err := sc.Scan(&t.Name, &data, &created, &updated, &t.Spawns, &spawned); err != nil {
		return nil, err
	}
	var doc templateDoc
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		return nil, fmt.Errorf("store: template %q: decode: %w", t.Name, err)
	}
	if err := json.Unmarshal(doc.Spec, &t.Spec); err != nil {
		return nil, fmt.Errorf("store: template %q: decode spec: %w", t.Name, err)
	}
	t.Image, t.ImageDigest, t.Layers, t.BuildID, t.Owner = doc.Image, doc.ImageDigest, doc.Layers, doc.BuildID, doc.Owner
	t.CreatedAt, t.UpdatedAt = fromNanos(created), fromNanos(updated)
	if spawned.Valid {
		t.LastSpawnedAt = fromNanos(spawned)
	}
	return &t, nil
}

// GetTemplate returns the template named name.
func (st *Store) GetTemplate(ctx context.Context, name string) (*store.Template, error) {
	if err := checkRecordName("template name", name); err != nil {
		return nil, err
	}
	t, err := scanTemplate(st.r.QueryRowContext(ctx, `SELECT name, data, created_at, updated_at, spawns, last_spawned_at FROM templates WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("template %q", name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get template %q: %w", name, ctxErr(ctx, err))
	}
	return t, nil
}

// ListTemplates lists templates by name.
func (st *Store) ListTemplates(ctx context.Context) ([]*store.Template, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT name, data, created_at, updated_at, spawns, last_spawned_at FROM templates ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list templates: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Template
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list templates: %w", err)
		}
		out = append(out, t)
	}
	return out, ctxErr(ctx, rows.Err())
}

// TemplateSpawned counts a sandbox created from the template name at at.
func (st *Store) TemplateSpawned(ctx context.Context, name string, at time.Time) error {
	if err := checkRecordName("template name", name); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE templates SET spawns = spawns + 1, last_spawned_at = max(coalesce(last_spawned_at, 0), ?) WHERE name = ?`, nanos(at), name)
		if err != nil {
			return fmt.Errorf("store: count a spawn of template %q: %w", name, ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("template %q", name)
		}
		return nil
	})
}

// DeleteTemplate removes a template and its build cache.
func (st *Store) DeleteTemplate(ctx context.Context, name string) error {
	if err := checkRecordName("template name", name); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM templates WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("store: delete template %q: %w", name, ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("template %q", name)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM build_cache WHERE template = ?`, name); err != nil {
			return fmt.Errorf("store: delete build cache of %q: %w", name, ctxErr(ctx, err))
		}
		return nil
	})
}

// PutBuildCache inserts or replaces a cache entry.
func (st *Store) PutBuildCache(ctx context.Context, e *store.BuildCacheEntry) error {
	if err := checkRecordName("build cache key", e.Key); err != nil {
		return err
	}
	layers, err := json.Marshal(e.Layers)
	if err != nil || e.Layers == nil {
		layers = []byte("[]")
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO build_cache (key, template, layers) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET template = excluded.template, layers = excluded.layers`,
			e.Key, e.Template, string(layers))
		if err != nil {
			return fmt.Errorf("store: put build cache: %w", ctxErr(ctx, err))
		}
		return nil
	})
}

func scanCache(sc scanner) (*store.BuildCacheEntry, error) {
	var (
		e      store.BuildCacheEntry
		layers string
	)
	if err := sc.Scan(&e.Key, &e.Template, &layers); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(layers), &e.Layers); err != nil {
		return nil, fmt.Errorf("store: build cache %q: decode: %w", e.Key, err)
	}
	return &e, nil
}

// GetBuildCache returns the entry with key.
func (st *Store) GetBuildCache(ctx context.Context, key string) (*store.BuildCacheEntry, error) {
	e, err := scanCache(st.r.QueryRowContext(ctx, `SELECT key, template, layers FROM build_cache WHERE key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("build cache entry %q", key)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get build cache: %w", ctxErr(ctx, err))
	}
	return e, nil
}

// ListBuildCache lists every entry.
func (st *Store) ListBuildCache(ctx context.Context) ([]*store.BuildCacheEntry, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT key, template, layers FROM build_cache ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("store: list build cache: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.BuildCacheEntry
	for rows.Next() {
		e, err := scanCache(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list build cache: %w", err)
		}
		out = append(out, e)
	}
	return out, ctxErr(ctx, rows.Err())
}

// PruneBuildCache removes the template's entries not named in keep.
func (st *Store) PruneBuildCache(ctx context.Context, template string, keep []string) error {
	k, err := json.Marshal(keep)
	if err != nil || keep == nil {
		k = []byte("[]")
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM build_cache WHERE template = ? AND key NOT IN (SELECT value FROM json_each(?))`, template, string(k))
		if err != nil {
			return fmt.Errorf("store: prune build cache of %q: %w", template, ctxErr(ctx, err))
		}
		return nil
	})
}

// poolDoc is the JSON kept in pools.data.
type poolDoc struct {
	Template  string          `json:"template"`
	MinReady  int             `json:"min_ready"`
	MaxReady  int             `json:"max_ready,omitempty"`
	Cooldown  int64           `json:"cooldown_ns"`
	Resources json.RawMessage `json:"resources"`
}

// PutPool inserts or replaces a pool.
func (st *Store) PutPool(ctx context.Context, p *store.Pool) error {
	if err := checkRecordName("pool name", p.Name); err != nil {
		return err
	}
	res, err := json.Marshal(p.Resources)
	if err != nil {
		return errdefs.Invalid("pool resources cannot be encoded")
	}
	data, _ := json.Marshal(poolDoc{Template: p.Template, MinReady: p.MinReady, MaxReady: p.MaxReady, Cooldown: int64(p.Cooldown), Resources: res})
	if p.CreatedAt.IsZero() {
		p.CreatedAt = now()
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO pools (name, data, created_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data`, p.Name, string(data), nanos(p.CreatedAt))
		if err != nil {
			return fmt.Errorf("store: put pool %q: %w", p.Name, ctxErr(ctx, err))
		}
		return nil
	})
}

func scanPool(sc scanner) (*store.Pool, error) {
	var (
		p       store.Pool
		data    string
		created sql.NullInt64
	)
	if err := sc.Scan(&p.Name, &data, &created); err != nil {
		return nil, err
	}
	var doc poolDoc
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		return nil, fmt.Errorf("store: pool %q: decode: %w", p.Name, err)
	}
	if len(doc.Resources) > 0 {
		if err := json.Unmarshal(doc.Resources, &p.Resources); err != nil {
			return nil, fmt.Errorf("store: pool %q: decode resources: %w", p.Name, err)
		}
	}
	p.Template, p.MinReady, p.MaxReady, p.Cooldown = doc.Template, doc.MinReady, doc.MaxReady, time.Duration(doc.Cooldown)
	p.CreatedAt = fromNanos(created)
	return &p, nil
}

// GetPool returns the pool named name.
func (st *Store) GetPool(ctx context.Context, name string) (*store.Pool, error) {
	if err := checkRecordName("pool name", name); err != nil {
		return nil, err
	}
	p, err := scanPool(st.r.QueryRowContext(ctx, `SELECT name, data, created_at FROM pools WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("pool %q", name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get pool %q: %w", name, ctxErr(ctx, err))
	}
	return p, nil
}

// ListPools lists pools by name.
func (st *Store) ListPools(ctx context.Context) ([]*store.Pool, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT name, data, created_at FROM pools ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list pools: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	var out []*store.Pool
	for rows.Next() {
		p, err := scanPool(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list pools: %w", err)
		}
		out = append(out, p)
	}
	return out, ctxErr(ctx, rows.Err())
}

// DeletePool removes a pool record.
func (st *Store) DeletePool(ctx context.Context, name string) error {
	if err := checkRecordName("pool name", name); err != nil {
		return err
	}
	return st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM pools WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("store: delete pool %q: %w", name, ctxErr(ctx, err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("pool %q", name)
		}
		return nil
	})
}
