package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	return c.stackLayers(img, tpl.Name, tpl.Layers)
}

// stackLayers is the image of template's build layers stacked on img, its
// base image, or img alone when there are none.
func (c *Controller) stackLayers(img *image.Image, template string, layers []string) (*image.Image, error) {
	if len(layers) == 0 {
		return img, nil
	}
	paths, err := c.layerPaths(layers) // snapshots.go
	if err != nil {
		return nil, err
	}
	out := *img
	out.Name = templateImageName(template)
	out.Digest = templateImageDigest(img.Digest, layers)
	out.Layers = append(slices.Clone(img.Layers), paths...)
	out.Source = ""
	return &out, nil
}

// podImage is the image a backend without this host's layers starts rec
// on, and how many of rec's snapshot layers that image already holds: a
// sandbox from a template built with steps runs the template's image,
// whose layers are the lowest of its snapshot layers. With
// Options.PushImage set, a build starting on layers (cached steps, a base
// template's) runs an image of them too. Anything else (a plain image, a
// build from the image alone, a snapshot's restore, a template rebuilt
// since) runs its base image, its layers' home directory written in by
// the backend. Backends that stack rec's layers themselves (b's kind)
// ignore both, and the template is not read for them.
//
// With Options.PushImage set, the image chosen is pushed first for a
// backend that does not stack layers; a push that fails fails the start.
func (c *Controller) podImage(ctx context.Context, b runtime.Backend, rec *store.Sandbox, img *image.Image) (runtime.ImageRef, int, error) {
	if stacksLayers(b) {
		return runtime.ImageRef{Name: img.Name, Digest: img.Digest}, 0, nil
	}
	run, n := img, 0
	if name := rec.Labels[labelTemplate]; name != "" && len(rec.SnapshotLayers) > 0 {
		tpl, err := c.opts.Store.GetTemplate(ctx, name)
		if err == nil && tpl.BuildID == rec.Labels[labelBuild] && tpl.ImageDigest == img.Digest &&
			len(tpl.Layers) > 0 && len(tpl.Layers) <= len(rec.SnapshotLayers) && slices.Equal(tpl.Layers, rec.SnapshotLayers[:len(tpl.Layers)]) {
			if run, err = c.stackLayers(img, tpl.Name, tpl.Layers); err != nil {
				return runtime.ImageRef{}, 0, err
			}
			n = len(tpl.Layers)
		}
	}
	if name := rec.Labels[labelBuilder]; name != "" && len(rec.SnapshotLayers) > 0 && c.opts.PushImage != nil {
		// A build resuming after its cached steps, or on a template with
		// build steps: its pod starts from an image holding those layers
		// (BuildStartsOnLayers), all of them root layers of builds.
		var err error
		if run, err = c.stackLayers(img, name, rec.SnapshotLayers); err != nil {
			return runtime.ImageRef{}, 0, err
		}
		n = len(rec.SnapshotLayers)
	}
	if err := c.pushImage(ctx, run); err != nil {
		return runtime.ImageRef{}, 0, err
	}
	return runtime.ImageRef{Name: run.Name, Digest: run.Digest}, n, nil
}

// pushImage pushes img with Options.PushImage, if set.
func (c *Controller) pushImage(ctx context.Context, img *image.Image) error {
	if c.opts.PushImage == nil {
		return nil
	}
	if err := c.opts.PushImage(ctx, img); err != nil {
		return fmt.Errorf("image %s for the nodes: %w", img.Name, err)
	}
	return nil
}
