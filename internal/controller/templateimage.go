package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// A template built with steps keeps its files in build layers on this
// host, which the local backends stack on its image. Exported
// (`paddock template export`), it is one OCI image: the base image's
// layers then the template's, with the agent, named by that content, for
// a registry or a cluster node's image store. A template without build
// steps exports its base image.

// templateImageDigest names a template's image by what it holds: its
// base image and its build layers, lowest first.
func templateImageDigest(imageDigest string, layers []string) string {
	h := sha256.New()
	h.Write([]byte("paddock template image\x00" + imageDigest))
	for _, l := range layers {
		h.Write([]byte("\x00" + l))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// templateImageName is the name a template's image goes by: the
// template's name without its tag, since tags of one build share the
// image (its digest tells builds apart).
func templateImageName(template string) string {
	name, _ := rules.SplitTemplateTag(template)
	return "template-" + name
}

// TemplateImage resolves template (name or name:tag) to one image: its
// base image with its build layers stacked on, or the base image alone
// for a template without build steps. A caller the admission policy keeps from
// the template is refused, as its creates are.
func (c *Controller) TemplateImage(ctx context.Context, template string) (*image.Image, error) {
	if err := RequireCaller(ctx); err != nil {
		return nil, err
	}
	name, ok := rules.TemplateRef(template)
	if !ok {
		return nil, errdefs.Invalid("template name %q is not valid (a name, or a name and a tag as name:tag)", rules.Truncate(template, 80))
	}
	tpl, err := c.opts.Store.GetTemplate(ctx, name)
	if err != nil {
		return nil, err
	}
	c.adm.mu.RLock()
	cp := c.adm.policy
	c.adm.mu.RUnlock()
	if err := cp.Check(&store.Sandbox{Image: tpl.Image, ImageDigest: tpl.ImageDigest, Runtime: c.templateRuntime(tpl)}, tpl.Name); err != nil {
		return nil, err
	}
	img, err := c.image(ctx, tpl.ImageDigest) // sandbox.go
	if err != nil {
		return nil, err
	}
	if len(tpl.Layers) == 0 {
		return img, nil
	}
	paths, err := c.layerPaths(tpl.Layers) // snapshots.go
	if err != nil {
		return nil, err
	}
	out := *img
	out.Name = templateImageName(tpl.Name)
	out.Digest = templateImageDigest(img.Digest, tpl.Layers)
	out.Layers = append(slices.Clone(img.Layers), paths...)
	out.Source = ""
	return &out, nil
}

// podImage is the image a backend without this host's layers starts rec
// on, and how many of rec's snapshot layers that image already holds: a
// sandbox from a template built with steps runs the template's image,
// whose layers are the lowest of its snapshot layers. Anything else (a
// plain image, a build, a snapshot's restore, a template rebuilt since)
// runs its base image, its layers' home directory written in by the
// backend. Backends that stack rec's layers themselves (b's kind) ignore
// both, and the template is not read for them.
func (c *Controller) podImage(ctx context.Context, b runtime.Backend, rec *store.Sandbox, img *image.Image) (runtime.ImageRef, int) {
	ref := runtime.ImageRef{Name: img.Name, Digest: img.Digest}
	name := rec.Labels[labelTemplate]
	if name == "" || len(rec.SnapshotLayers) == 0 || stacksLayers(b) {
		return ref, 0
	}
	tpl, err := c.opts.Store.GetTemplate(ctx, name)
	if err != nil || tpl.BuildID != rec.Labels[labelBuild] || tpl.ImageDigest != img.Digest ||
		len(tpl.Layers) == 0 || len(tpl.Layers) > len(rec.SnapshotLayers) || !slices.Equal(tpl.Layers, rec.SnapshotLayers[:len(tpl.Layers)]) {
		return ref, 0
	}
	return runtime.ImageRef{Name: templateImageName(tpl.Name), Digest: templateImageDigest(img.Digest, tpl.Layers)}, len(tpl.Layers)
}
