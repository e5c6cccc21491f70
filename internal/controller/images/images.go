// Package images is the controller's image subsystem: what happens to
// the images the daemon keeps once they are there (built, imported or
// pulled by internal/image): their removal, unless a sandbox, snapshot or
// template uses one, the collection of layers no image uses, who an
// import is recorded as and what it may hold, and the export of an image
// with the agent as its entrypoint for a cluster's nodes. A create and a
// removal are ordered by the core's hold (Core.HoldImages).
package images

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/store"
)

// Collector is the image store's removal side, found on Options.Images
// by type assertion so a store that cannot remove images need not
// implement it.
type Collector interface {
	Remove(ctx context.Context, ref string) (*image.Image, error)
	GC(ctx context.Context, keep []string) (image.GCResult, error)
}

// Registry is where the daemon pushed images for a cluster's nodes
// (*image.Pusher): an image removed from the store is deleted there too.
type Registry interface {
	Ref(img *image.Image) string
	Unpush(ctx context.Context, img *image.Image) error
}

// lister lists the image store's images (found on Options.Images).
type lister interface {
	List(ctx context.Context) ([]*image.Image, error)
}

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// Image resolves ref, building a built-in image on first use.
	Image(ctx context.Context, ref string) (*image.Image, error)
	// TemplateImage resolves a template to the image its sandboxes run
	// away from this host.
	TemplateImage(ctx context.Context, template string) (*image.Image, error)
	// HoldImages keeps creates from resolving images until release.
	HoldImages() (release func())
}

var _ Core = (*controller.Controller)(nil)

// Store lists what uses images.
type Store interface {
	ListSandboxes(ctx context.Context, labels map[string]string) ([]*store.Sandbox, error)
	ListSnapshots(ctx context.Context) ([]*store.Snapshot, error)
	ListTemplates(ctx context.Context) ([]*store.Template, error)
}

// Options configures the subsystem.
type Options struct {
	Core  Core
	Store Store
	// Images is the image store (a Collector to remove images at all).
	Images controller.Images
	// AgentBinary is the agent an exported image gets as its entrypoint.
	AgentBinary string
	// MaxPerKey caps what one API key's imports may hold on disk (0: no
	// cap).
	MaxPerKey int64
	// Registry, if set, is where images were pushed for a cluster's
	// nodes; a removed image is deleted from it.
	Registry Registry
	Logger   *slog.Logger
}

// Service serves the images' removal, collection, imports' accounting
// and export.
type Service struct {
	core        Core
	st          Store
	images      controller.Images
	agentBinary string
	agentID     func() (string, error) // image.AgentID(agentBinary), read once
	maxPerKey   int64
	registry    Registry
	log         *slog.Logger
}

// New returns the subsystem.
func New(o Options) *Service {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: o.Core, st: o.Store, images: o.Images, agentBinary: o.AgentBinary, maxPerKey: o.MaxPerKey, registry: o.Registry, log: log,
		agentID: sync.OnceValues(func() (string, error) { return image.AgentID(o.AgentBinary) })}
}

func (s *Service) collector() (Collector, error) {
	ic, ok := s.images.(Collector)
	if !ok {
		return nil, fmt.Errorf("this image store cannot remove images: %w", errdefs.ErrFailedPrecondition)
	}
	return ic, nil
}

// inUse maps each image digest that a sandbox (in any state but
// destroyed), snapshot or template uses to one user, for error messages.
func (s *Service) inUse(ctx context.Context) (map[string]string, error) {
	used := make(map[string]string)
	sbs, err := s.st.ListSandboxes(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, s := range sbs {
		if _, ok := used[s.ImageDigest]; !ok {
			used[s.ImageDigest] = "sandbox " + s.ID
		}
	}
	snaps, err := s.st.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if _, ok := used[s.ImageDigest]; !ok {
			used[s.ImageDigest] = "snapshot " + s.ID
		}
	}
	tpls, err := s.st.ListTemplates(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tpls {
		if _, ok := used[t.ImageDigest]; !ok {
			used[t.ImageDigest] = "template " + t.Name
		}
	}
	return used, nil
}

// ImportOptions is who an import or pull by ctx's caller is recorded
// as and the cap on what its images may hold on disk.
func (s *Service) ImportOptions(ctx context.Context) image.ImportOptions {
	return image.ImportOptions{Owner: controller.Caller(ctx), MaxOwnerBytes: s.maxPerKey}
}

// Remove deletes an image's record unless a sandbox, snapshot or
// template uses it; its layers go at the next GC. With gc set, that GC
// runs straight away. A key of scope own may remove only the images it
// imported or pulled first.
func (s *Service) Remove(ctx context.Context, ref string, gc bool) (*image.Image, *image.GCResult, error) {
	ic, err := s.collector()
	if err != nil {
		return nil, nil, err
	}
	var removed *image.Image
	// Once the hold is let go (deferred calls run last first): the
	// registry is another host, and creates wait on the hold.
	defer func() {
		if removed != nil {
			s.unpush(ctx, removed)
		}
	}()
	defer s.core.HoldImages()()
	img, err := s.images.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	if img.Owner == "" || img.Owner != controller.Caller(ctx) {
		// Built-in images and other callers' imports are shared: the
		// same refusal for both, so it says nothing of who imported it.
		if err := controller.RequireScopeAll(ctx, "deleting an image this key did not import"); err != nil {
			return nil, nil, err
		}
	}
	used, err := s.inUse(ctx)
	if err != nil {
		return nil, nil, err
	}
	if who, ok := used[img.Digest]; ok {
		if controller.CallerScope(ctx) != api.KeyScopeAll {
			who = "a sandbox, snapshot or template" // perhaps another owner's: not named
		}
		return nil, nil, fmt.Errorf("image %s is in use by %s (and maybe others); remove those first: %w", img.Digest, who, errdefs.ErrFailedPrecondition)
	}
	removed, err = ic.Remove(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	s.log.Info("image removed", "image", removed.Digest, "name", removed.Name)
	if !gc {
		return removed, nil, nil
	}
	res, err := s.gcLocked(ctx, ic)
	if err != nil {
		return removed, nil, err
	}
	return removed, &res, nil
}

// unpushTimeout bounds a removed image's deletion from the registry.
const unpushTimeout = 30 * time.Second

// unpush deletes a removed image from the cluster's registry, unless
// another image of the store is pushed under the same reference (names
// that differ only in characters a reference cannot hold, with the same
// content). A registry that fails or refuses is logged: the image is
// gone from the store either way.
func (s *Service) unpush(ctx context.Context, removed *image.Image) {
	if s.registry == nil {
		return
	}
	ls, ok := s.images.(lister)
	if !ok {
		return
	}
	all, err := ls.List(ctx)
	if err != nil {
		s.log.Warn("image not deleted from the registry: the store's images could not be listed", "image", removed.Name, "err", err)
		return
	}
	ref := s.registry.Ref(removed)
	for _, other := range all {
		if s.registry.Ref(other) == ref {
			return
		}
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unpushTimeout)
	defer cancel()
	if err := s.registry.Unpush(uctx, removed); err != nil {
		s.log.Warn("image not deleted from the registry", "image", removed.Name, "ref", ref, "err", err)
	}
}

// GC deletes every layer that no image, sandbox, snapshot or template
// references.
func (s *Service) GC(ctx context.Context) (image.GCResult, error) {
	if err := controller.RequireScopeAll(ctx, "image garbage collection"); err != nil {
		return image.GCResult{}, err
	}
	ic, err := s.collector()
	if err != nil {
		return image.GCResult{}, err
	}
	defer s.core.HoldImages()()
	return s.gcLocked(ctx, ic)
}

func (s *Service) gcLocked(ctx context.Context, ic Collector) (image.GCResult, error) {
	used, err := s.inUse(ctx)
	if err != nil {
		return image.GCResult{}, err
	}
	keep := make([]string, 0, len(used))
	for d := range used {
		keep = append(keep, d)
	}
	slices.Sort(keep)
	res, err := ic.GC(ctx, keep)
	if err != nil {
		return res, err
	}
	s.log.Info("image layers collected", "removed", len(res.RemovedLayers), "freed_bytes", res.FreedBytes)
	return res, nil
}

// DefaultOCIPrefix is where exported images are named when the caller
// names no registry: a name no registry answers for, for `ctr images
// import` on a node.
const DefaultOCIPrefix = "paddock.local"

// Export writes the image ref, with the agent added and set as its
// entrypoint, to w as an OCI image layout archive named under prefix
// (image.ExportOCI), for a registry or a cluster node's containerd. Any
// caller may export any image it may start sandboxes from: built-in ones
// are built on first use. open is called with the archive's reference
// just before its first byte, and gives the writer the archive goes to;
// an error before then leaves it uncalled.
func (s *Service) Export(ctx context.Context, ref, prefix string, open func(name string) io.Writer) (string, error) {
	return s.export(ctx, "image "+ref, prefix, func() (*image.Image, error) { return s.core.Image(ctx, ref) }, open)
}

// ExportTemplate is Export of the image a template's sandboxes run on a
// backend without this host's layers (Kubernetes): its base image with
// its build layers stacked on (Core.TemplateImage).
func (s *Service) ExportTemplate(ctx context.Context, template, prefix string, open func(name string) io.Writer) (string, error) {
	return s.export(ctx, "template "+template, prefix, func() (*image.Image, error) { return s.core.TemplateImage(ctx, template) }, open)
}

func (s *Service) export(ctx context.Context, what, prefix string, resolve func() (*image.Image, error), open func(name string) io.Writer) (string, error) {
	if err := controller.RequireCaller(ctx); err != nil {
		return "", err
	}
	if prefix == "" {
		prefix = DefaultOCIPrefix
	}
	if err := image.ValidateOCIPrefix(prefix); err != nil {
		return "", err
	}
	img, err := resolve()
	if err != nil {
		return "", err
	}
	agent, err := s.agentID()
	if err != nil {
		return "", err
	}
	name := image.OCIRef(prefix, img, agent)
	tmp := "" // the layers' tars wait beside the layers, not in a small /tmp
	if d, ok := s.images.(interface{ Dir() string }); ok {
		tmp = d.Dir()
	}
	w := &openOnWrite{open: func() io.Writer { return open(name) }}
	err = image.ExportOCI(ctx, img, image.OCIExport{Ref: name, AgentBinary: s.agentBinary, TempDir: tmp}, w)
	if err != nil {
		return "", fmt.Errorf("export %s: %w", what, err)
	}
	return name, nil
}

// openOnWrite opens its writer with the first byte.
type openOnWrite struct {
	open func() io.Writer
	w    io.Writer
}

func (o *openOnWrite) Write(p []byte) (int, error) {
	if o.w == nil {
		o.w = o.open()
	}
	return o.w.Write(p)
}
