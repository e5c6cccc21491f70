package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// Reserved labels: pooled and build sandboxes are ordinary sandboxes the
// controller finds by these, so a caller may not set them.
const (
	labelTemplate = "paddock.dev/template"
	labelBuild    = "paddock.dev/build"
	// labelDefaultUser and labelDefaultCwd keep, on a sandbox made from a
	// template, who its commands run as and where when they name neither.
	labelDefaultUser = "paddock.dev/default-user"
	labelDefaultCwd  = "paddock.dev/default-cwd"
	labelBuilder     = "paddock.dev/builder"
	labelPool        = "paddock.dev/pool"
	labelPoolReady   = "paddock.dev/pool-ready"
	labelIdentifier  = "paddock.dev/identifier"
)

// templatePlan is what creating from a template adds to a sandbox record.
type templatePlan struct {
	layers []string
	labels map[string]string
	keep   bool
}

func (p *templatePlan) apply(rec *store.Sandbox) {
	if p == nil {
		return
	}
	rec.SnapshotLayers = append([]string(nil), p.layers...)
	if len(p.labels) > 0 && rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	maps.Copy(rec.Labels, p.labels)
	if p.keep {
		rec.KeepAlive = true
	}
}

// hasReservedLabel reports whether l sets one of the labels the controller
// finds pooled and build sandboxes by. Other paddock.dev/ labels are free:
// the CLI marks `do` sandboxes with one, and the E2B facade its own.
func hasReservedLabel(l map[string]string) bool {
	for _, k := range []string{labelTemplate, labelBuild, labelBuilder, labelPool, labelPoolReady, labelIdentifier, labelClusterPool, labelDefaultUser, labelDefaultCwd} {
		if _, ok := l[k]; ok {
			return true
		}
	}
	return false
}

// templateLayersInUse adds the layers of every template and build cache
// entry to used; false means they could not be listed, and nothing may be
// collected this time.
func (c *Controller) templateLayersInUse(ctx context.Context, used map[string]bool) bool {
	ts, err := c.opts.Store.ListTemplates(ctx)
	if err != nil {
		c.log.Error("layer collection: list templates", "err", err)
		return false
	}
	for _, t := range ts {
		for _, d := range t.Layers {
			used[d] = true
		}
	}
	es, err := c.opts.Store.ListBuildCache(ctx)
	if err != nil {
		c.log.Error("layer collection: list build cache", "err", err)
		return false
	}
	for _, e := range es {
		for _, d := range e.Layers {
			used[d] = true
		}
	}
	return true
}

// The core's side of template builds (internal/controller/templates
// builds them through these).

// CanKeepLayers says why the daemon cannot keep file system layers, or nil.
func (c *Controller) CanKeepLayers() error {
	_, err := c.snapStore()
	return err
}

// ResolveImage finds the image a template build starts from: ref, or the
// daemon's default image when ref is empty; it returns the name looked
// for and the image's digest.
func (c *Controller) ResolveImage(ctx context.Context, ref string) (name, digest string, err error) {
	if ref == "" {
		ref = c.cfg.DefaultImage
	}
	img, err := c.image(ctx, ref)
	if err != nil {
		return "", "", err
	}
	return ref, img.Digest, nil
}

// LayersPresent reports whether every layer is still on disk.
func (c *Controller) LayersPresent(layers []string) bool {
	ss, err := c.snapStore()
	if err != nil {
		return false
	}
	for _, d := range layers {
		if _, err := ss.LayerPath(d); err != nil {
			return false
		}
	}
	return true
}

// StartBuild creates the build sandbox of template from req on top of
// layers: kept alive, marked as a builder (so the pools do not count it,
// and a builder left by a crash is found and destroyed).
func (c *Controller) StartBuild(ctx context.Context, template string, req api.CreateSandboxRequest, layers []string) (string, error) {
	req.Labels = map[string]string{labelBuilder: template}
	sb, err := c.create(ctx, req, &templatePlan{layers: layers, keep: true})
	if err != nil {
		return "", err
	}
	c.pools.SetBuilding(sb.ID, true)
	return sb.ID, nil
}

// BuildStartsOnLayers says whether a build on rt ("" the default runtime)
// may start from layers (a cached step, or a template it builds on): a
// backend that stacks them on this host, or one that runs sandboxes away
// from it (runtime.RootLayerSnapshotter) when the images its pods run are
// pushed (Options.PushImage), so its pod starts from an image holding
// them. Otherwise such a pod starts from the image alone.
func (c *Controller) BuildStartsOnLayers(rt string) bool {
	if rt == "" {
		rt = c.cfg.DefaultRuntime
	}
	b, err := c.backend(rt)
	if err != nil {
		return true // the build's start says what is wrong
	}
	return stacksLayers(b) || c.opts.PushImage != nil
}

// stacksLayers says whether b stacks a sandbox's layers on this host
// itself, or runs it away from this host (runtime.RootLayerSnapshotter),
// from an image the nodes hold.
func stacksLayers(b runtime.Backend) bool {
	_, away := b.(runtime.RootLayerSnapshotter)
	return !away
}

// EndBuild destroys a build sandbox.
func (c *Controller) EndBuild(ctx context.Context, id string) {
	if err := c.destroy(ctx, id, "template build finished"); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		c.log.Error("destroy build sandbox", "sandbox", id, "err", err)
	}
	c.pools.SetBuilding(id, false)
}

// CommitBuildLayer captures a build sandbox's writable layer on top of the
// layers it started with and hands the chain to keep while the layer
// collector is held off, so that the chain is recorded before the
// collector can see the new layer unused.
func (c *Controller) CommitBuildLayer(ctx context.Context, id string, keep func(chain []string) error) ([]string, error) {
	rec, _, unlock, err := c.lockRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	chain, _, err := c.captureLayer(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer c.snaps.mu.Unlock()
	out := make([]string, 0, len(chain))
	for _, l := range chain {
		out = append(out, l.Digest)
	}
	if err := keep(out); err != nil {
		return nil, err
	}
	return out, nil
}

// PutTemplate records a built template and has the pools of it refilled.
// It is recorded under the image lock, so the image cannot be collected
// between the build sandbox going away and the template naming it.
func (c *Controller) PutTemplate(ctx context.Context, t *store.Template) error {
	imageUse.RLock()
	if _, err := c.opts.Images.Resolve(ctx, t.ImageDigest); err != nil {
		imageUse.RUnlock()
		return fmt.Errorf("template %s: its image %s went away during the build: %w", t.Name, t.ImageDigest, errdefs.ErrUnavailable)
	}
	err := c.opts.Store.PutTemplate(context.WithoutCancel(ctx), t)
	imageUse.RUnlock()
	if err != nil {
		return err
	}
	c.pools.Kick()
	return nil
}

// TemplateDeleted has the pools of a deleted template stop refilling and
// the layers nothing uses any longer collected.
func (c *Controller) TemplateDeleted(ctx context.Context) {
	c.pools.Kick()
	go c.collectLayers(context.WithoutCancel(ctx))
}

// RemoveOrphanBuilders destroys the build sandboxes an earlier daemon left
// behind mid-build: those made before this daemon's first build.
func (c *Controller) RemoveOrphanBuilders(ctx context.Context) {
	c.removeOrphanBuilders(ctx, time.Now())
}

// removeOrphanBuilders destroys build sandboxes a previous daemon left
// behind mid-build: no build of this daemon started before before.
func (c *Controller) removeOrphanBuilders(ctx context.Context, before time.Time) {
	list, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		return
	}
	for _, sb := range list {
		live := c.pools.Building(sb.ID)
		if _, ok := sb.Labels[labelBuilder]; ok && !live && sb.CreatedAt.Before(before) {
			c.log.Info("removing build sandbox left by an earlier daemon", "sandbox", sb.ID)
			_ = c.destroy(ctx, sb.ID, "template build was interrupted")
		}
	}
}
