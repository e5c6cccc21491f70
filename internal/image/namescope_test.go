package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
)

// TestResolveNameForCaller: three callers import different images under
// one name. Under ForCaller a name finds the caller's own import, else the
// newest shared one, never another tenant's, however new; a digest finds
// any. Without a caller the newest of all wins.
func TestResolveNameForCaller(t *testing.T) {
	needLayerRoot(t)
	s := newOCIStore(t)
	ctx := context.Background()
	const tag = "example.test/app:1"
	digests := map[string]string{}
	for _, owner := range []string{"k1", "local", "k2"} { // k2's is the newest
		img, err := imagetest.Image(v1.Config{Env: []string{"WHO=" + owner}}, imagetest.Tar(imagetest.File("who", owner)))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "img.tar")
		if err := imagetest.WriteDockerArchive(p, tag, img); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Import(ctx, f, ImportOptions{Owner: owner})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		digests[owner] = got.Digest
		time.Sleep(1100 * time.Millisecond) // import times are kept to the second
	}
	shared := func(owner string) bool { return owner == "local" }
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string // "" for not found
	}{
		{"no caller: the newest", ctx, "k2"},
		{"an importer: its own", ForCaller(ctx, "k1", shared), "k1"},
		{"another key: the shared one, not the newer tenant's", ForCaller(ctx, "k3", shared), "local"},
		{"nothing shared: not found", ForCaller(ctx, "k3", nil), ""},
	} {
		img, err := s.Resolve(c.ctx, tag)
		switch {
		case c.want == "" && !errors.Is(err, errdefs.ErrNotFound):
			t.Errorf("%s: %v %v, want not found", c.name, img, err)
		case c.want != "" && (err != nil || img.Digest != digests[c.want]):
			t.Errorf("%s: %v %v, want %s's %s", c.name, img, err, c.want, digests[c.want])
		}
	}
	if img, err := s.Resolve(ForCaller(ctx, "k3", nil), digests["k2"]); err != nil || img.Digest != digests["k2"] {
		t.Errorf("by digest under another caller: %v %v", img, err)
	}
}
