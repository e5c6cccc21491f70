package controller

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/config"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

// removableImages is an image store fake that can remove its images.
type removableImages struct{ images }

func (m removableImages) Remove(ctx context.Context, ref string) (*image.Image, error) {
	img, err := m.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	delete(m.images, img.Name)
	return img, nil
}

func (m removableImages) GC(context.Context, []string) (image.GCResult, error) {
	return image.GCResult{}, nil
}

// TestRemoveImageByOwnKey: a key of scope own removes the images it
// imported, and is refused a built-in image and another key's import with
// one and the same refusal.
func TestRemoveImageByOwnKey(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(System(context.Background()), filepath.Join(dir, "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	imgs := removableImages{images{
		"busybox": {Name: "busybox", Digest: "sha256:" + strings.Repeat("b", 64)},
		"mine":    {Name: "mine", Digest: "sha256:" + strings.Repeat("1", 64), Source: "mine", Owner: "key-a"},
		"theirs":  {Name: "theirs", Digest: "sha256:" + strings.Repeat("2", 64), Source: "theirs", Owner: "key-b"},
	}}
	c, err := New(Options{Store: st, Images: imgs, Backends: map[string]runtime.Backend{"runc": nil}, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	a := WithCaller(System(context.Background()), "key-a", api.KeyScopeOwn)
	var msgs []string
	for _, ref := range []string{"busybox", "theirs"} {
		_, _, err := c.RemoveImage(a, ref, false)
		if !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Fatalf("own key removing %s: %v", ref, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("the refusals differ, telling a built-in image from another key's:\n%s\n%s", msgs[0], msgs[1])
	}
	if _, _, err := c.RemoveImage(a, "mine", false); err != nil {
		t.Fatalf("own key removing its import: %v", err)
	}
	if _, ok := imgs.images["mine"]; ok {
		t.Fatal("the image was not removed")
	}
	if _, _, err := c.RemoveImage(System(context.Background()), "theirs", false); err != nil {
		t.Fatalf("the unix socket removing any import: %v", err)
	}
}
