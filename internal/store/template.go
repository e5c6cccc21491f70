package store

import (
	"context"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// Template is a built template: its definition and the layers its build
// produced on top of its image.
type Template struct {
	Name        string
	Spec        api.TemplateSpec
	Image       string
	ImageDigest string
	Layers      []string // snapshot layer digests, lowest first
	BuildID     string
	// Owner is the API key that built it (api.CallerLocal over the
	// unix socket; "" for a template built before builders were kept):
	// a key of scope own may rebuild only its own.
	Owner     string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Spawns counts the sandboxes created from it (TemplateSpawned), the
	// last at LastSpawnedAt (zero: none yet). PutTemplate keeps both.
	Spawns        int64
	LastSpawnedAt time.Time
}

// BuildCacheEntry is the result of one build step, found again by the
// content hash of everything that step depended on.
type BuildCacheEntry struct {
	Key      string // hex sha256
	Template string // the template whose build recorded it
	Layers   []string
}

// Pool is a warm pool's definition; its sandboxes are found by label.
type Pool struct {
	Name      string
	Template  string
	MinReady  int
	MaxReady  int           // 0: the pool does not grow past MinReady
	Cooldown  time.Duration // 0: the daemon's idle policy
	Resources api.Resources
	CreatedAt time.Time
}

// TemplateStore keeps templates, their build cache and warm pools. Errors
// wrap errdefs sentinels: ErrNotFound for a missing name or key.
type TemplateStore interface {
	// PutTemplate inserts or replaces the template named t.Name.
	PutTemplate(ctx context.Context, t *Template) error
	GetTemplate(ctx context.Context, name string) (*Template, error)
	// ListTemplates lists templates by name.
	ListTemplates(ctx context.Context) ([]*Template, error)
	// TemplateSpawned counts a sandbox created from the template at at.
	TemplateSpawned(ctx context.Context, name string, at time.Time) error
	// DeleteTemplate removes the template and its build cache entries.
	DeleteTemplate(ctx context.Context, name string) error

	PutBuildCache(ctx context.Context, e *BuildCacheEntry) error
	GetBuildCache(ctx context.Context, key string) (*BuildCacheEntry, error)
	ListBuildCache(ctx context.Context) ([]*BuildCacheEntry, error)
	// PruneBuildCache removes the template's entries whose key is not in keep.
	PruneBuildCache(ctx context.Context, template string, keep []string) error

	// PutPool inserts or replaces the pool named p.Name.
	PutPool(ctx context.Context, p *Pool) error
	GetPool(ctx context.Context, name string) (*Pool, error)
	ListPools(ctx context.Context) ([]*Pool, error)
	DeletePool(ctx context.Context, name string) error

	// ClaimSandbox replaces a pooled sandbox's record as UpdateSandbox
	// does and hands it to the caller that claimed it (s.KeyID) in the
	// same step (UpdateSandbox keeps the creator).
	ClaimSandbox(ctx context.Context, s *Sandbox) error
}
