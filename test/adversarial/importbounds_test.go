package adversarial

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func apiErr(t *testing.T, err error) *paddock.APIError {
	t.Helper()
	var ae *paddock.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an API error, got %v", err)
	}
	return ae
}

// dockerArchiveOf writes a docker archive of one image whose layers are
// the given tars.
func dockerArchiveOf(t *testing.T, tag string, layers ...[]byte) []byte {
	t.Helper()
	img, err := imagetest.Image(v1.Config{Env: []string{"PATH=/bin"}}, layers...)
	if err != nil {
		t.Fatal(err)
	}
	data, err := imagetest.DockerArchive(tag, img)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func randomFile(t *testing.T, name string, n int) imagetest.Entry {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return imagetest.File(name, string(b))
}

// TestImageImportBounds, through the real daemon and API keys of scope
// own: a few KiB archive whose layer holds a 1 GiB sparse entry is a 400
// and never more than a few KiB on disk; each key's imports are capped
// (PADDOCK_IMAGE_IMPORT_MAX_PER_KEY) with a 4xx giving the numbers and
// nothing left behind; a key may delete what it imported, and not another
// key's import or a built-in image, after which its room is back.
func TestImageImportBounds(t *testing.T) {
	imagesDir := t.TempDir()
	d := startDaemon(t, daemonOpts{listen: true, imagesDir: imagesDir, env: []string{"PADDOCK_IMAGE_IMPORT_MAX_PER_KEY=1M"}})
	a := newTenant(t, d, uniqueName("imp-a"), api.KeyScopeOwn)
	b := newTenant(t, d, uniqueName("imp-b"), api.KeyScopeOwn)
	ctx := ctxT(t, 5*time.Minute)

	// Sparse: refused, and the store never grows by the expanded size.
	sparse := dockerArchiveOf(t, "evil.test/sparse:1", append(tarsafetest.PAXSparse("big", 1<<30, []byte("x")), tarsafetest.End()...))
	stop := tarsafetest.WatchUsage(imagesDir)
	_, err := a.sdk.ImportImage(ctx, bytes.NewReader(sparse), "")
	peak := stop()
	ae := apiErr(t, err)
	t.Logf("sparse archive of %d bytes: %d %s %q; peak image store use %d bytes", len(sparse), ae.Status, ae.Code, ae.Message, peak)
	if ae.Status != 400 || ae.Code != api.CodeInvalidArgument || !strings.Contains(ae.Message, "sparse") {
		t.Fatalf("sparse import: %d %s %q", ae.Status, ae.Code, ae.Message)
	}
	if peak > 4<<20 {
		t.Fatalf("the image store grew to %d bytes during a refused sparse import", peak)
	}

	// The cap: 700 KiB fits in 1 MiB, another 700 KiB does not.
	first, err := a.sdk.ImportImage(ctx, bytes.NewReader(dockerArchiveOf(t, "app.test/one:1", imagetest.Tar(randomFile(t, "one", 700<<10)))), "")
	if err != nil {
		t.Fatal(err)
	}
	layers := func() int {
		ents, _ := os.ReadDir(filepath.Join(imagesDir, "layers", "sha256"))
		return len(ents)
	}
	before := layers()
	second := dockerArchiveOf(t, "app.test/two:1", imagetest.Tar(randomFile(t, "two", 700<<10)))
	_, err = a.sdk.ImportImage(ctx, bytes.NewReader(second), "")
	ae = apiErr(t, err)
	t.Logf("over the cap: %d %s %q", ae.Status, ae.Code, ae.Message)
	if ae.Status < 400 || ae.Status >= 500 || ae.Code != api.CodeResourceExhausted ||
		!strings.Contains(ae.Message, "716800 bytes on disk") || !strings.Contains(ae.Message, "1048576") {
		t.Fatalf("import over the cap: %d %s %q", ae.Status, ae.Code, ae.Message)
	}
	if got := layers(); got != before {
		t.Fatalf("the refused import left layers: %d before, %d after", before, got)
	}
	// Another key has its own room.
	if _, err := b.sdk.ImportImage(ctx, bytes.NewReader(second), ""); err != nil {
		t.Fatalf("key b: %v", err)
	}

	// Deleting: not b's image, not a built-in one; a's own, yes.
	d.must("images", "build", "busybox")
	for _, ref := range []string{first.Digest, "busybox"} {
		_, err := b.sdk.RemoveImage(ctx, ref, false)
		if ae := apiErr(t, err); ae.Code != api.CodePermissionDenied {
			t.Fatalf("key b removing %s: %d %s %q", ref, ae.Status, ae.Code, ae.Message)
		}
	}
	if _, err := a.sdk.RemoveImage(ctx, first.Digest, true); err != nil {
		t.Fatalf("key a removing its own import: %v", err)
	}
	if _, err := a.sdk.ImportImage(ctx, bytes.NewReader(second), "app.test/two-again"); err != nil {
		t.Fatalf("key a after freeing its room: %v", err)
	}
	if out := d.must("images", "ls"); !strings.Contains(out, "busybox") || strings.Contains(out, first.Digest) {
		t.Fatalf("images after the removals:\n%s", out)
	}
}
