package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestTemplateImage: a template built with steps exports as an image of
// its own (its base image's layers then its build
// layers) named by that content and shared by its tags; a template
// without steps is its base image; the admission policy's templates
// bound it as they bound creates.
func TestTemplateImage(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newSnapshotController(t)
	layer := func(content string) string {
		tmp, err := ss.Temp()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := ss.Commit(ctx, tmp)
		if err != nil {
			t.Fatal(err)
		}
		return l.Digest
	}
	l1, l2 := layer("one"), layer("two")
	base, err := c.image(ctx, "base")
	if err != nil {
		t.Fatal(err)
	}
	for _, tpl := range []*store.Template{
		{Name: "tl", Image: "base", ImageDigest: base.Digest, Layers: []string{l1}, BuildID: "b1"},
		{Name: "tl:v2", Image: "base", ImageDigest: base.Digest, Layers: []string{l1}, BuildID: "b1"},
		{Name: "tl:v3", Image: "base", ImageDigest: base.Digest, Layers: []string{l1, l2}, BuildID: "b3"},
		{Name: "plain", Image: "base", ImageDigest: base.Digest, BuildID: "b0"},
	} {
		if err := c.opts.Store.PutTemplate(ctx, tpl); err != nil {
			t.Fatal(err)
		}
	}

	v2, err := c.TemplateImage(ctx, "tl:v2")
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := ss.LayerPath(l1)
	if v2.Name != "template-tl" || v2.Digest == base.Digest || !slices.Equal(v2.Layers, append(slices.Clone(base.Layers), p1)) {
		t.Fatalf("template image: %+v", v2)
	}
	if base.Name != "base" || len(base.Layers) != 1 {
		t.Fatalf("the base image changed: %+v", base)
	}
	def, err := c.TemplateImage(ctx, "tl:default")
	if err != nil || def.Digest != v2.Digest || def.Name != v2.Name {
		t.Fatalf("a tag of the same build: %+v, %v", def, err)
	}
	v3, err := c.TemplateImage(ctx, "tl:v3")
	if err != nil || v3.Digest == v2.Digest || len(v3.Layers) != 3 {
		t.Fatalf("another build: %+v, %v", v3, err)
	}
	if plain, err := c.TemplateImage(ctx, "plain"); err != nil || plain.Digest != base.Digest || plain.Name != "base" {
		t.Fatalf("a template without build steps: %+v, %v", plain, err)
	}
	for ref, want := range map[string]error{"nope": errdefs.ErrNotFound, "tl:": errdefs.ErrInvalidArgument, "../x": errdefs.ErrInvalidArgument} {
		if _, err := c.TemplateImage(ctx, ref); !errors.Is(err, want) {
			t.Errorf("TemplateImage(%q): %v, want %v", ref, err, want)
		}
	}
	if _, err := c.TemplateImage(context.Background(), "tl"); err == nil {
		t.Error("a call without a caller was served")
	}

	if _, err := c.SetPolicy(ctx, api.Policy{AllowedTemplates: []string{"plain"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TemplateImage(ctx, "tl"); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("a template the policy does not allow: %v", err)
	}
	if _, err := c.TemplateImage(ctx, "plain"); err != nil {
		t.Errorf("a template the policy allows: %v", err)
	}
}

// awayBackend is a backend that runs sandboxes away from this host's
// layers, as the Kubernetes backend does.
type awayBackend struct{ runtime.Backend }

func (awayBackend) SnapshotLayer(context.Context, string, string) error { return nil }
func (awayBackend) SnapshotRootLayer(context.Context, string, string, []string) error {
	return nil
}

// TestPodImage: a sandbox from a template built with steps starts, on a
// backend away from this host, from the template's image, whose layers
// are its lowest snapshot layers; a rebuilt template, a plain image and
// every start on a backend that stacks the layers itself start from the
// base image.
func TestPodImage(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newSnapshotController(t)
	tmp, err := ss.Temp()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ss.Commit(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	base, err := c.image(ctx, "base")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.opts.Store.PutTemplate(ctx, &store.Template{Name: "tl", Image: "base", ImageDigest: base.Digest, Layers: []string{l.Digest}, BuildID: "b1"}); err != nil {
		t.Fatal(err)
	}
	local, err := c.backend("runc")
	if err != nil {
		t.Fatal(err)
	}
	away := awayBackend{local}
	rec := func(build string) *store.Sandbox {
		return &store.Sandbox{Labels: map[string]string{labelTemplate: "tl", labelBuild: build}, SnapshotLayers: []string{l.Digest, "sha256:home"}}
	}
	baseRef := runtime.ImageRef{Name: base.Name, Digest: base.Digest}
	for _, tc := range []struct {
		name   string
		b      runtime.Backend
		rec    *store.Sandbox
		want   runtime.ImageRef
		layers int
	}{
		{"away, the template's build", away, rec("b1"), runtime.ImageRef{Name: templateImageName("tl"), Digest: templateImageDigest(base.Digest, []string{l.Digest})}, 1},
		{"away, a build since replaced", away, rec("b0"), baseRef, 0},
		{"away, a plain image", away, &store.Sandbox{}, baseRef, 0},
		{"stacking layers itself", local, rec("b1"), baseRef, 0},
	} {
		var pushed []*image.Image
		c.opts.PushImage = func(_ context.Context, img *image.Image) error {
			pushed = append(pushed, img)
			return nil
		}
		ref, n, err := c.podImage(ctx, tc.b, tc.rec, base)
		if err != nil {
			t.Fatal(err)
		}
		if ref != tc.want || n != tc.layers {
			t.Errorf("%s: %+v with %d layers, want %+v with %d", tc.name, ref, n, tc.want, tc.layers)
		}
		// What the pod names is what was pushed: the base image's layers,
		// then the template's.
		switch {
		case tc.b == local && len(pushed) != 0:
			t.Errorf("%s: pushed %d images for a backend that stacks layers", tc.name, len(pushed))
		case tc.b != local && (len(pushed) != 1 || pushed[0].Name != ref.Name || pushed[0].Digest != ref.Digest || len(pushed[0].Layers) != len(base.Layers)+tc.layers):
			t.Errorf("%s: pushed %+v for %+v", tc.name, pushed, ref)
		}
	}
	// A build resuming on layers runs an image of them when images are
	// pushed, and the base image when they are not.
	build := &store.Sandbox{Labels: map[string]string{labelBuilder: "tb"}, SnapshotLayers: []string{l.Digest}}
	if ref, n, err := c.podImage(ctx, away, build, base); err != nil || n != 1 || ref.Name != "template-tb" || ref.Digest != templateImageDigest(base.Digest, []string{l.Digest}) {
		t.Errorf("a build on a cached layer, pushed: %+v, %d, %v", ref, n, err)
	}
	c.opts.PushImage = nil
	if ref, n, err := c.podImage(ctx, away, build, base); err != nil || n != 0 || ref != baseRef {
		t.Errorf("a build on a cached layer, not pushed: %+v, %d, %v", ref, n, err)
	}
	c.opts.PushImage = func(context.Context, *image.Image) error { return errors.New("registry away") }
	if _, _, err := c.podImage(ctx, away, rec("b1"), base); err == nil || !strings.Contains(err.Error(), "registry away") || !strings.Contains(err.Error(), "template-tl") {
		t.Errorf("a failed push: %v", err)
	}
}
