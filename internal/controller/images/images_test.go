package images

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// removable is an image store that can remove its images and records
// what a collection was told to keep.
type removable struct {
	controllertest.Images
	kept []string
}

func (m *removable) Remove(ctx context.Context, ref string) (*image.Image, error) {
	img, err := m.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	delete(m.Images, img.Name)
	return img, nil
}

func (m *removable) GC(_ context.Context, keep []string) (image.GCResult, error) {
	m.kept = keep
	return image.GCResult{}, nil
}

// TestRemoveAndCollect: a key of scope own removes the images it
// imported, and is refused a built-in image and another key's import with
// one and the same refusal; an image a sandbox uses is not removed (whose
// sandbox is named only to a caller that sees everything); a collection
// needs scope all and keeps what sandboxes use. No root: the process
// backend.
func TestRemoveAndCollect(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	busybox := env.Images[controllertest.Image]
	imgs := &removable{Images: controllertest.Images{
		"busybox": busybox,
		"mine":    {Name: "mine", Digest: "sha256:" + strings.Repeat("1", 64), Source: "mine", Owner: "key-a"},
		"theirs":  {Name: "theirs", Digest: "sha256:" + strings.Repeat("2", 64), Source: "theirs", Owner: "key-b"},
	}}
	s := New(Options{Core: env.Controller, Store: env.Store, Images: imgs, MaxPerKey: 1 << 20, Logger: controllertest.Logger(t)})
	bg := context.Background()
	a := controller.WithCaller(bg, "key-a", api.KeyScopeOwn)
	sys := controller.System(bg)

	var msgs []string
	for _, ref := range []string{"busybox", "theirs"} {
		_, _, err := s.Remove(a, ref, false)
		if !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Fatalf("own key removing %s: %v", ref, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("the refusals differ, telling a built-in image from another key's:\n%s\n%s", msgs[0], msgs[1])
	}
	if _, _, err := s.Remove(a, "mine", false); err != nil {
		t.Fatalf("own key removing its import: %v", err)
	}
	if _, ok := imgs.Images["mine"]; ok {
		t.Fatal("the image was not removed")
	}

	sb, err := env.Controller.Create(controller.WithCaller(bg, "key-b", api.KeyScopeOwn), api.CreateSandboxRequest{Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Remove(sys, "busybox", true); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), sb.ID) {
		t.Fatalf("removing an image a sandbox uses: %v", err)
	}
	if _, ok := imgs.Images["busybox"]; !ok {
		t.Fatal("an image in use was removed")
	}
	if _, err := s.GC(a); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("a key of scope own collected layers: %v", err)
	}
	if _, err := s.GC(sys); err != nil || len(imgs.kept) != 1 || imgs.kept[0] != busybox.Digest {
		t.Errorf("collection kept %v, %v; want the sandbox's image", imgs.kept, err)
	}
	if _, res, err := s.Remove(sys, "theirs", true); err != nil || res == nil {
		t.Fatalf("the unix socket removing any import, then collecting: %v, %v", res, err)
	}
	if o := s.ImportOptions(a); o.Owner != "key-a" || o.MaxOwnerBytes != 1<<20 {
		t.Errorf("import options: %+v", o)
	}
}

// TestNoCollector: an image store that cannot remove images says so.
func TestNoCollector(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	s := New(Options{Core: env.Controller, Store: env.Store, Images: env.Images})
	if _, err := s.GC(controller.System(context.Background())); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("collection without a collector: %v", err)
	}
}

// listable is a removable store that lists its images too.
type listable struct{ *removable }

func (m listable) List(context.Context) ([]*image.Image, error) {
	out := make([]*image.Image, 0, len(m.Images))
	for _, img := range m.Images {
		out = append(out, img)
	}
	return out, nil
}

// registry records what was deleted from it; refs are by name with
// '_' as '-' (as a reference cannot hold '_') and digest.
type registry struct {
	unpushed []string
	fail     error
	// hold is the core's image hold; free says whether it was free at
	// each delete.
	hold func() (release func())
	free []bool
}

func (r *registry) Ref(img *image.Image) string {
	return strings.ReplaceAll(img.Name, "_", "-") + ":" + img.Digest
}

func (r *registry) Unpush(_ context.Context, img *image.Image) error {
	r.unpushed = append(r.unpushed, r.Ref(img))
	got := make(chan struct{})
	go func() {
		r.hold()()
		close(got)
	}()
	select {
	case <-got:
		r.free = append(r.free, true)
	case <-time.After(2 * time.Second):
		r.free = append(r.free, false) // taken and let go once the removal ends
	}
	return r.fail
}

// TestRemoveUnpushes: a removed image is deleted from the cluster's
// registry, unless another image is pushed under the same reference; an
// image in use is not; a registry that fails does not fail the removal;
// the registry is called once the image hold, which creates wait on, is
// let go.
func TestRemoveUnpushes(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	same := "sha256:" + strings.Repeat("3", 64)
	imgs := listable{&removable{Images: controllertest.Images{
		"busybox": env.Images[controllertest.Image],
		"a":       {Name: "a", Digest: "sha256:" + strings.Repeat("1", 64), Source: "a"},
		"b":       {Name: "b", Digest: "sha256:" + strings.Repeat("2", 64), Source: "b"},
		"c_d":     {Name: "c_d", Digest: same, Source: "c_d"},
		"c-d":     {Name: "c-d", Digest: same, Source: "c-d"},
	}}}
	reg := &registry{hold: env.Controller.HoldImages}
	s := New(Options{Core: env.Controller, Store: env.Store, Images: imgs, Registry: reg, Logger: controllertest.Logger(t)})
	sys := controller.System(context.Background())
	if _, err := env.Controller.Create(sys, api.CreateSandboxRequest{Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Remove(sys, "busybox", false); err == nil {
		t.Fatal("an image in use was removed")
	}
	if _, _, err := s.Remove(sys, "a", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Remove(sys, "c_d", false); err != nil {
		t.Fatal(err)
	}
	reg.fail = errors.New("registry away")
	if _, _, err := s.Remove(sys, "b", false); err != nil {
		t.Fatalf("a removal whose registry failed: %v", err)
	}
	want := []string{"a:sha256:" + strings.Repeat("1", 64), "b:sha256:" + strings.Repeat("2", 64)}
	if !slices.Equal(reg.unpushed, want) {
		t.Fatalf("unpushed %q, want %q (not c-d, which another image is pushed as)", reg.unpushed, want)
	}
	if !slices.Equal(reg.free, []bool{true, true}) {
		t.Errorf("the image hold was free at the registry's deletes: %v, want at both", reg.free)
	}
}
