package controller

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
)

// ImageCollector is the image store's removal side, found on
// Options.Images by type assertion so test fakes need not implement it.
type ImageCollector interface {
	Remove(ctx context.Context, ref string) (*image.Image, error)
	GC(ctx context.Context, keep []string) (image.GCResult, error)
}

// imageUse orders image removal against sandbox creation: a create holds it
// shared from resolving its image until the sandbox is recorded (so the
// image shows as in use), removal and collection hold it exclusively. It is
// per process, like the image store's directory it guards.
var imageUse sync.RWMutex

func (c *Controller) collector() (ImageCollector, error) {
	ic, ok := c.opts.Images.(ImageCollector)
	if !ok {
		return nil, fmt.Errorf("this image store cannot remove images: %w", errdefs.ErrFailedPrecondition)
	}
	return ic, nil
}

// imagesInUse maps each image digest that a sandbox (in any state but
// destroyed), snapshot or template uses to one user, for error messages.
func (c *Controller) imagesInUse(ctx context.Context) (map[string]string, error) {
	used := make(map[string]string)
	sbs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, s := range sbs {
		if _, ok := used[s.ImageDigest]; !ok {
			used[s.ImageDigest] = "sandbox " + s.ID
		}
	}
	snaps, err := c.opts.Store.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if _, ok := used[s.ImageDigest]; !ok {
			used[s.ImageDigest] = "snapshot " + s.ID
		}
	}
	tpls, err := c.opts.Store.ListTemplates(ctx)
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

// ImageImportOptions is who an import or pull by ctx's caller is recorded
// as and the cap on what its images may hold on disk.
func (c *Controller) ImageImportOptions(ctx context.Context) image.ImportOptions {
	return image.ImportOptions{Owner: Caller(ctx), MaxOwnerBytes: c.cfg.ImageImportMaxPerKey}
}

// RemoveImage deletes an image's record unless a sandbox, snapshot or
// template uses it; its layers go at the next GC. With gc set, that GC
// runs straight away. A key of scope own may remove only the images it
// imported or pulled first.
func (c *Controller) RemoveImage(ctx context.Context, ref string, gc bool) (*image.Image, *image.GCResult, error) {
	ic, err := c.collector()
	if err != nil {
		return nil, nil, err
	}
	imageUse.Lock()
	defer imageUse.Unlock()
	img, err := c.opts.Images.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	if img.Owner == "" || img.Owner != Caller(ctx) {
		// Built-in images and other callers' imports are shared: the
		// same refusal for both, so it says nothing of who imported it.
		if err := requireScopeAll(ctx, "deleting an image this key did not import"); err != nil { // scope.go
			return nil, nil, err
		}
	}
	used, err := c.imagesInUse(ctx)
	if err != nil {
		return nil, nil, err
	}
	if who, ok := used[img.Digest]; ok {
		if CallerScope(ctx) != api.KeyScopeAll {
			who = "a sandbox, snapshot or template" // perhaps another owner's: not named
		}
		return nil, nil, fmt.Errorf("image %s is in use by %s (and maybe others); remove those first: %w", img.Digest, who, errdefs.ErrFailedPrecondition)
	}
	removed, err := ic.Remove(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	c.log.Info("image removed", "image", removed.Digest, "name", removed.Name)
	if !gc {
		return removed, nil, nil
	}
	res, err := c.gcLocked(ctx, ic)
	if err != nil {
		return removed, nil, err
	}
	return removed, &res, nil
}

// GCImages deletes every layer that no image, sandbox, snapshot or template
// references.
func (c *Controller) GCImages(ctx context.Context) (image.GCResult, error) {
	if err := requireScopeAll(ctx, "image garbage collection"); err != nil {
		return image.GCResult{}, err
	}
	ic, err := c.collector()
	if err != nil {
		return image.GCResult{}, err
	}
	imageUse.Lock()
	defer imageUse.Unlock()
	return c.gcLocked(ctx, ic)
}

func (c *Controller) gcLocked(ctx context.Context, ic ImageCollector) (image.GCResult, error) {
	used, err := c.imagesInUse(ctx)
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
	c.log.Info("image layers collected", "removed", len(res.RemovedLayers), "freed_bytes", res.FreedBytes)
	return res, nil
}

// imageEnv is the sandbox's environment: the image's, then the request's,
// which wins for a name both set, then the agent's settings from the
// image's config.
func imageEnv(img *image.Image, env map[string]string) []string {
	out := make([]string, 0, len(img.Env)+len(env))
	for _, kv := range img.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, override := env[k]; !override {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	// The image's User and WorkingDir become the agent's defaults for
	// requests that name no user or directory. The agent keeps its own
	// variables from the processes it starts.
	if img.User != "" {
		out = append(out, wire.EnvDefaultUser+"="+img.User)
	}
	if img.WorkingDir != "" {
		out = append(out, wire.EnvDefaultCwd+"="+img.WorkingDir)
	}
	return out
}

// DefaultOCIPrefix is where exported images are named when the caller
// names no registry: a name no registry answers for, for `ctr images
// import` on a node.
const DefaultOCIPrefix = "paddock.local"

// ExportImage writes the image ref, with the agent added and set as its
// entrypoint, to w as an OCI image layout archive named under prefix
// (image.ExportOCI), for a registry or a cluster node's containerd. Any
// caller may export any image it may start sandboxes from: built-in ones
// are built on first use. open is called with the archive's reference
// just before its first byte, and gives the writer the archive goes to;
// an error before then leaves it uncalled.
func (c *Controller) ExportImage(ctx context.Context, ref, prefix string, open func(name string) io.Writer) (string, error) {
	if err := requireCaller(ctx); err != nil { // scope.go
		return "", err
	}
	if prefix == "" {
		prefix = DefaultOCIPrefix
	}
	if err := image.ValidateOCIPrefix(prefix); err != nil {
		return "", err
	}
	img, err := c.image(ctx, ref) // sandbox.go
	if err != nil {
		return "", err
	}
	name := image.OCIRef(prefix, img)
	tmp := "" // the layers' tars wait beside the layers, not in a small /tmp
	if d, ok := c.opts.Images.(interface{ Dir() string }); ok {
		tmp = d.Dir()
	}
	w := &openOnWrite{open: func() io.Writer { return open(name) }}
	err = image.ExportOCI(ctx, img, image.OCIExport{Ref: name, AgentBinary: c.opts.AgentBinary, TempDir: tmp}, w)
	if err != nil {
		return "", fmt.Errorf("export image %s: %w", ref, err)
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
