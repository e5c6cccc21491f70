package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
)

func dockerArchive(t *testing.T, tag string, layers ...[]byte) []byte {
	t.Helper()
	img, err := imagetest.Image(v1.Config{}, layers...)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "a.tar")
	if err := imagetest.WriteDockerArchive(p, tag, img); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func sparseLayer(entry []byte) []byte {
	return append(append(imagetest.Tar(imagetest.Dir("d"))[:0:0], entry...), tarsafetest.End()...)
}

// handArchive is a docker archive written by hand around one layer
// entry, which may be sparse: tarball-written archives cannot hold one.
func handArchive(t *testing.T, layerEntry []byte, diffID string) []byte {
	t.Helper()
	cfg := fmt.Sprintf(`{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[%q]}}`, diffID)
	man := `[{"Config":"config.json","RepoTags":["evil:1"],"Layers":["layer.tar"]}]`
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range []struct{ name, body string }{{"manifest.json", man}, {"config.json", cfg}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f.body))
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	b.Write(layerEntry)
	b.Write(tarsafetest.End())
	return b.Bytes()
}

// TestImportRefusesSparseEntries: a layer holding a 256 MiB sparse entry
// with one byte of data, or an archive whose layer file is itself such an
// entry, is refused, and what the import writes to disk stays a few KiB
// at every moment (old code wrote the whole expanded size, then refused
// or kept it).
func TestImportRefusesSparseEntries(t *testing.T) {
	needLayerRoot(t)
	const big = 256 << 20
	// The layer the outer sparse entry expands to: a header, then the
	// hole as a big file of zeros.
	var inner bytes.Buffer
	tw := tar.NewWriter(&inner)
	_ = tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: big - 3*512})
	_ = tw.Flush()
	head := bytes.Clone(inner.Bytes())
	h := sha256.New()
	h.Write(head)
	_, _ = io.CopyN(h, zeros{}, big-int64(len(head)))
	innerID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	tests := []struct {
		name string
		data []byte
	}{
		{"pax sparse layer entry", dockerArchive(t, "evil:1", sparseLayer(tarsafetest.PAXSparse("big", big, []byte("x"))))},
		{"gnu sparse layer entry", dockerArchive(t, "evil:1", sparseLayer(tarsafetest.GNUSparse("big", big, []byte("x"))))},
		{"pax sparse archive entry", handArchive(t, tarsafetest.PAXSparseAt("layer.tar", big, 0, head), innerID)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newOCIStore(t)
			stop := tarsafetest.WatchUsage(s.Dir())
			_, err := s.Import(context.Background(), bytes.NewReader(tc.data), ImportOptions{Owner: "k1"})
			peak := stop()
			t.Logf("archive %d bytes, peak on disk %d bytes: %v", len(tc.data), peak, err)
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "sparse") {
				t.Fatalf("err = %v, want a sparse refusal", err)
			}
			if peak > 1<<20 {
				t.Fatalf("the import wrote %d bytes to disk at its peak", peak)
			}
			if ents, _ := os.ReadDir(s.layersDir()); len(ents) != 0 {
				t.Fatalf("layers left behind: %v", ents)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestImportOwnerCap: an owner's imports are charged what they write; one
// that would pass the cap fails before writing past it, keeps none of its
// layers (not even those that fitted), says the numbers, and another
// owner is not affected.
func TestImportOwnerCap(t *testing.T) {
	needLayerRoot(t)
	const limit = 100 << 10
	s := newOCIStore(t)
	ctx := context.Background()
	imp := func(owner string, data []byte) (*Image, error) {
		return s.Import(ctx, bytes.NewReader(data), ImportOptions{Owner: owner, MaxOwnerBytes: limit})
	}
	blob := func(c string, n int) string { return strings.Repeat(c, n) }
	first, err := imp("k1", dockerArchive(t, "a:1", imagetest.Tar(imagetest.File("a", blob("a", 40<<10)))))
	if err != nil {
		t.Fatal(err)
	}
	if first.Owner != "k1" {
		t.Fatalf("owner = %q", first.Owner)
	}
	if used, _ := s.OwnerUsage("k1"); used != 40<<10 {
		t.Fatalf("k1 uses %d, want %d", used, 40<<10)
	}
	layersBefore, _ := os.ReadDir(s.layersDir())
	// 30 KiB fits, the next 40 KiB does not: both layers go.
	over := dockerArchive(t, "b:1",
		imagetest.Tar(imagetest.File("b1", blob("b", 30<<10))),
		imagetest.Tar(imagetest.File("b2", blob("c", 40<<10))))
	_, err = imp("k1", over)
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("err = %v, want resource exhausted", err)
	}
	for _, want := range []string{"API key k1", "hold 40960 bytes", "wrote 30720", "needs 40960 more", "limit per caller is 102400"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if after, _ := os.ReadDir(s.layersDir()); len(after) != len(layersBefore) {
		t.Fatalf("the refused import kept layers: %d before, %d after", len(layersBefore), len(after))
	}
	if tmp, _ := os.ReadDir(s.tmpDir()); len(tmp) != 0 {
		t.Fatalf("debris in tmp: %v", tmp)
	}
	// Another owner has its own cap.
	if _, err := imp("k2", over); err != nil {
		t.Fatalf("k2: %v", err)
	}
	// Re-importing k2's image as k1 stores nothing new: it is allowed,
	// and the image stays k2's.
	again, err := imp("k1", over)
	if err != nil || again.Owner != "k2" {
		t.Fatalf("re-import: %v, owner %q", err, again.Owner)
	}
	if used, _ := s.OwnerUsage("k1"); used != 40<<10 {
		t.Fatalf("k1 uses %d after re-importing k2's image", used)
	}
	if used, _ := s.OwnerUsage("k2"); used != 70<<10 {
		t.Fatalf("k2 uses %d, want %d", used, 70<<10)
	}
}

// TestImportFullOwnerReadsNothing: an owner already at its cap is refused
// before a byte of the archive is read or written.
func TestImportFullOwnerReadsNothing(t *testing.T) {
	needLayerRoot(t)
	s := newOCIStore(t)
	ctx := context.Background()
	data := dockerArchive(t, "a:1", imagetest.Tar(imagetest.File("a", strings.Repeat("a", 8<<10))))
	if _, err := s.Import(ctx, bytes.NewReader(data), ImportOptions{Owner: "k1", MaxOwnerBytes: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(dockerArchive(t, "b:1", imagetest.Tar(imagetest.File("b", "b"))))
	_, err := s.Import(ctx, r, ImportOptions{Owner: "k1", MaxOwnerBytes: 8 << 10})
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("err = %v", err)
	}
	if r.Len() != int(r.Size()) {
		t.Fatalf("the refused import read %d bytes", r.Size()-int64(r.Len()))
	}
	// An archive larger than what is left is refused while it is received.
	noise := make([]byte, 16<<10)
	_, _ = rand.Read(noise)
	data = dockerArchive(t, "c:1", imagetest.Tar(imagetest.File("c", string(noise))))
	_, err = s.Import(ctx, bytes.NewReader(data), ImportOptions{Owner: "k3", MaxOwnerBytes: 4 << 10})
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "leaves 4096") {
		t.Fatalf("err = %v", err)
	}
}
