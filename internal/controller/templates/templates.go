// Package templates builds templates and serves their records: a build
// runs a definition's steps in a build sandbox the core starts, commits
// the sandbox's writable layer after each step that changes files, caches
// each step's result under the hash of everything it depends on, and
// records the template. Creating a sandbox from a template is the core's
// (internal/controller): a create claims from a warm pool in the middle of
// its own work; the pools are internal/controller/warmpools.
package templates

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// CanKeepLayers says why the daemon cannot keep file system layers
	// (no snapshot store), or nil.
	CanKeepLayers() error
	// ResolveImage finds the image a build starts from: ref, or the
	// daemon's default image when ref is empty. It returns the name it
	// looked for and the image's digest.
	ResolveImage(ctx context.Context, ref string) (name, digest string, err error)
	// LayersPresent says whether every layer is still on disk.
	LayersPresent(layers []string) bool
	// BuildStartsOnLayers says whether a build on runtime ("" the default)
	// may start from layers: a cached step, or a template it builds on.
	BuildStartsOnLayers(runtime string) bool
	// StartBuild creates the build sandbox of template from req on top
	// of layers; EndBuild destroys it.
	StartBuild(ctx context.Context, template string, req api.CreateSandboxRequest, layers []string) (id string, err error)
	EndBuild(ctx context.Context, id string)
	// Exec runs a command in a sandbox, streaming its events to emit.
	Exec(ctx context.Context, ref string, req api.ExecRequest, emit controller.Emit) error
	// Agent reaches a running sandbox ctx's caller may use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
	// CommitBuildLayer captures the build sandbox's writable layer on top
	// of the layers it started with and hands the whole chain to keep
	// while the layer collector is held off, so that keep can record it
	// before the collector could see the new layer unused.
	CommitBuildLayer(ctx context.Context, id string, keep func(chain []string) error) ([]string, error)
	// PutTemplate records a built template, provided its image is still
	// here (held against collection while it is recorded), and has the
	// pools of it refilled.
	PutTemplate(ctx context.Context, t *store.Template) error
	// TemplateDeleted has the pools of a deleted template stop refilling
	// and the layers nothing uses any longer collected.
	TemplateDeleted(ctx context.Context)
}

var _ Core = (*controller.Controller)(nil)

// Store keeps the templates and their build cache.
type Store interface {
	GetTemplate(ctx context.Context, name string) (*store.Template, error)
	ListTemplates(ctx context.Context) ([]*store.Template, error)
	DeleteTemplate(ctx context.Context, name string) error
	PutBuildCache(ctx context.Context, e *store.BuildCacheEntry) error
	GetBuildCache(ctx context.Context, key string) (*store.BuildCacheEntry, error)
	PruneBuildCache(ctx context.Context, template string, keep []string) error
}

// Options configures the subsystem.
type Options struct {
	Core   Core
	Store  Store
	Logger *slog.Logger
}

// Service builds and serves templates.
type Service struct {
	core Core
	st   Store
	log  *slog.Logger
	// recording makes a build's last check and its record one step
	// (record).
	recording sync.Mutex
}

// New returns the subsystem.
func New(o Options) *Service {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: o.Core, st: o.Store, log: log}
}

func templateAPI(t *store.Template) *api.Template {
	out := &api.Template{
		Name: t.Name, Spec: t.Spec, Image: t.Image, ImageDigest: t.ImageDigest,
		Layers: append([]string{}, t.Layers...), BuildID: t.BuildID,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Spawns: t.Spawns,
	}
	if !t.LastSpawnedAt.IsZero() {
		at := t.LastSpawnedAt
		out.LastSpawnedAt = &at
	}
	return out
}

// Get returns a template by name.
func (s *Service) Get(ctx context.Context, name string) (*api.Template, error) {
	name, err := templateRef(name)
	if err != nil {
		return nil, err
	}
	t, err := s.st.GetTemplate(ctx, name)
	if err != nil {
		return nil, err
	}
	return templateAPI(t), nil
}

// List lists templates by name.
func (s *Service) List(ctx context.Context) ([]api.Template, error) {
	ts, err := s.st.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Template{}
	for _, t := range ts {
		out = append(out, *templateAPI(t))
	}
	return out, nil
}

// Delete removes a template and its build cache. Sandboxes made from it
// keep running; pools of it stop refilling and say why. A key of scope
// own may delete only the templates it built (the refusal is the same
// whoever built it, and for a template that does not exist).
func (s *Service) Delete(ctx context.Context, name string) error {
	if err := controller.RequireCaller(ctx); err != nil {
		return err
	}
	name, err := templateRef(name)
	if err != nil {
		return err
	}
	// No build of this daemon records a template between the check and
	// the delete.
	s.recording.Lock()
	defer s.recording.Unlock()
	old, err := s.st.GetTemplate(ctx, name)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	if old == nil || old.Owner == "" || old.Owner != controller.Caller(ctx) {
		if err := controller.RequireScopeAll(ctx, "deleting a template this key did not build"); err != nil {
			return err
		}
	}
	if err := s.st.DeleteTemplate(ctx, name); err != nil {
		return err
	}
	s.log.Info("template deleted", "template", name)
	s.core.TemplateDeleted(ctx)
	return nil
}

// templateRef checks a template's name, with its tag if any, and returns
// it canonical (rules.TemplateRef).
func templateRef(s string) (string, error) {
	name, ok := rules.TemplateRef(s)
	if !ok {
		return "", errdefs.Invalid("template name %q is not valid (a name, or a name and a tag as name:tag)", rules.Truncate(s, 80))
	}
	return name, nil
}
