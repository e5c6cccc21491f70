package image

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
)

func newOCIStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// twoLayerImage has a lower layer and an upper one that deletes a file and
// makes a directory opaque.
func twoLayerImage(t *testing.T) v1.Image {
	t.Helper()
	lower := imagetest.Tar(imagetest.Dir("etc"), imagetest.File("etc/old", "old"), imagetest.Dir("data"), imagetest.File("data/a", "a"))
	upper := imagetest.Tar(imagetest.File("etc/.wh.old", ""), imagetest.File("data/.wh..wh..opq", ""), imagetest.File("data/b", "b"))
	img, err := imagetest.Image(v1.Config{Env: []string{"PATH=/bin", "APP_MODE=test"}, WorkingDir: "/data", User: "1000"}, lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func checkStored(t *testing.T, s *Store, img *Image) {
	t.Helper()
	if len(img.Layers) != 2 {
		t.Fatalf("layers = %v", img.Layers)
	}
	if b, err := os.ReadFile(filepath.Join(img.Layers[1], "data/b")); err != nil || string(b) != "b" {
		t.Fatalf("upper layer: %v %q", err, b)
	}
	if b, err := os.ReadFile(filepath.Join(img.Layers[0], "etc/old")); err != nil || string(b) != "old" {
		t.Fatalf("lower layer: %v %q", err, b)
	}
	if !slices.Contains(img.Env, "APP_MODE=test") || img.WorkingDir != "/data" || img.User != "1000" {
		t.Fatalf("config not recorded: %+v", img)
	}
	got, err := s.Resolve(context.Background(), img.Digest)
	if err != nil || got.Digest != img.Digest || len(got.Layers) != 2 {
		t.Fatalf("resolve by digest: %v %+v", err, got)
	}
	list, err := s.List(context.Background())
	if err != nil || !slices.ContainsFunc(list, func(i *Image) bool { return i.Digest == img.Digest }) {
		t.Fatalf("list: %v %v", err, list)
	}
	if tmp, _ := os.ReadDir(s.tmpDir()); len(tmp) != 0 {
		t.Fatalf("debris in tmp: %v", tmp)
	}
}

func TestImportArchives(t *testing.T) {
	needLayerRoot(t)
	src := twoLayerImage(t)
	wantDigest, _ := src.Digest()
	wantConfig, _ := src.ConfigName()
	tests := []struct {
		name   string
		write  func(path string) error
		digest v1.Hash
		source string
	}{
		{"docker-archive", func(p string) error { return imagetest.WriteDockerArchive(p, "example.test/app:1", src) }, wantConfig, "example.test/app:1"},
		{"oci-layout", func(p string) error { return imagetest.WriteOCIArchive(p, src) }, wantDigest, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newOCIStore(t)
			p := filepath.Join(t.TempDir(), "img.tar")
			if err := tc.write(p); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			img, err := s.Import(context.Background(), f, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if img.Digest != tc.digest.String() || img.Source != tc.source {
				t.Fatalf("digest %s source %q, want %s %q", img.Digest, img.Source, tc.digest, tc.source)
			}
			checkStored(t, s, img)
			if tc.source != "" {
				if byTag, err := s.Resolve(context.Background(), tc.source); err != nil || byTag.Digest != img.Digest {
					t.Fatalf("resolve by tag: %v", err)
				}
			}
		})
	}
}

func TestImportRefusesBadArchives(t *testing.T) {
	needLayerRoot(t)
	evil, err := imagetest.Image(v1.Config{}, imagetest.Tar(imagetest.File("../../escape", "x")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	evilPath := filepath.Join(dir, "evil.tar")
	if err := imagetest.WriteDockerArchive(evilPath, "evil:1", evil); err != nil {
		t.Fatal(err)
	}
	evilData, _ := os.ReadFile(evilPath)
	tests := []struct {
		name string
		data []byte
		max  int64
		want error
	}{
		{"not a tar", []byte("hello"), 0, errdefs.ErrInvalidArgument},
		{"empty tar", imagetest.Tar(imagetest.File("x", "y")), 0, errdefs.ErrInvalidArgument},
		{"escaping layer", evilData, 0, errdefs.ErrInvalidArgument},
		{"too large", evilData, 100, errdefs.ErrResourceExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newOCIStore(t)
			_, err := s.Import(context.Background(), bytes.NewReader(tc.data), ImportOptions{MaxArchive: tc.max})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if ents, _ := os.ReadDir(s.layersDir()); len(ents) != 0 {
				t.Fatalf("layers left behind: %v", ents)
			}
			if tmp, _ := os.ReadDir(s.tmpDir()); len(tmp) != 0 {
				t.Fatalf("debris in tmp: %v", tmp)
			}
		})
	}
}

// faultyRegistry serves an in-process registry on loopback; mode damages
// the blob whose digest is target: "corrupt" flips a byte, "truncate"
// sends half of it.
type faultyRegistry struct {
	srv    *httptest.Server
	target atomic.Value // string
	mode   atomic.Value // string
}

func newRegistry(t *testing.T) *faultyRegistry {
	t.Helper()
	fr := &faultyRegistry{}
	fr.target.Store("")
	fr.mode.Store("")
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	fr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := fr.target.Load().(string)
		if r.Method != http.MethodGet || target == "" || !strings.HasSuffix(r.URL.Path, "/blobs/"+target) {
			reg.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		switch fr.mode.Load().(string) {
		case "corrupt":
			body = bytes.Clone(body)
			body[len(body)/2] ^= 0xff
		case "truncate":
			body = body[:len(body)/2]
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(fr.srv.Close)
	return fr
}

func (fr *faultyRegistry) push(t *testing.T, repo string, img v1.Image) string {
	t.Helper()
	ref := strings.TrimPrefix(fr.srv.URL, "http://") + "/" + repo
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestPull(t *testing.T) {
	needLayerRoot(t)
	fr := newRegistry(t)
	src := twoLayerImage(t)
	ref := fr.push(t, "team/tool:1.4", src)
	want, _ := src.Digest()
	s := newOCIStore(t)
	var lines []string
	img, err := s.Pull(context.Background(), ref, ImportOptions{Progress: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != want.String() || img.Source != ref {
		t.Fatalf("digest %s source %s, want %s %s", img.Digest, img.Source, want, ref)
	}
	if len(lines) == 0 {
		t.Fatal("no progress")
	}
	checkStored(t, s, img)
}

func TestPullRefusesDamagedLayers(t *testing.T) {
	needLayerRoot(t)
	fr := newRegistry(t)
	src := twoLayerImage(t)
	ref := fr.push(t, "team/tool:1.4", src)
	layers, _ := src.Layers()
	d, _ := layers[1].Digest()
	for _, mode := range []string{"corrupt", "truncate"} {
		t.Run(mode, func(t *testing.T) {
			fr.target.Store(d.String())
			fr.mode.Store(mode)
			t.Cleanup(func() { fr.target.Store("") })
			s := newOCIStore(t)
			_, err := s.Pull(context.Background(), ref, ImportOptions{})
			if err == nil || !strings.Contains(err.Error(), "layer 2/2") {
				t.Fatalf("damaged layer accepted or unclear error: %v", err)
			}
			t.Logf("refused: %v", err)
			recs, _ := s.listImportedRecords()
			if len(recs) != 0 {
				t.Fatalf("image recorded: %v", recs)
			}
			if tmp, _ := os.ReadDir(s.tmpDir()); len(tmp) != 0 {
				t.Fatalf("debris in tmp: %v", tmp)
			}
			// Neither the damaged layer nor the one below it, which
			// verified, is kept: no record would charge anyone for it.
			for i := range layers {
				if _, err := os.Stat(s.layerPath(mustDiffID(t, layers[i]))); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("layer %d of a failed pull kept: %v", i, err)
				}
			}
		})
	}
}

func mustDiffID(t *testing.T, l v1.Layer) string {
	t.Helper()
	d, err := l.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func TestRemoveAndGC(t *testing.T) {
	needLayerRoot(t)
	s := newOCIStore(t)
	shared := imagetest.Tar(imagetest.File("shared", "s"))
	a, _ := imagetest.Image(v1.Config{}, shared, imagetest.Tar(imagetest.File("a", "a")))
	b, _ := imagetest.Image(v1.Config{}, shared, imagetest.Tar(imagetest.File("b", "b")))
	imp := func(img v1.Image) *Image {
		p := filepath.Join(t.TempDir(), "x.tar")
		if err := imagetest.WriteOCIArchive(p, img); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(p)
		out, err := s.Import(context.Background(), bytes.NewReader(data), ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ia, ib := imp(a), imp(b)
	if _, err := s.Remove(context.Background(), ia.Digest); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(context.Background(), ia.Digest); err == nil {
		t.Fatal("removed image still resolves")
	}
	// b is still in use by a (pretend) sandbox after its record goes too.
	if _, err := s.Remove(context.Background(), ib.Digest); err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(context.Background(), []string{ib.Digest})
	if err != nil {
		t.Fatal(err)
	}
	// ib's record is gone, so a kept digest without a record keeps only a
	// layer of that name; record-less in-use images are the caller's to
	// prevent (the controller refuses to remove an image in use).
	if len(res.RemovedLayers) != 3 {
		t.Fatalf("removed %v", res.RemovedLayers)
	}
	if ents, _ := os.ReadDir(s.layersDir()); len(ents) != 0 {
		t.Fatalf("layers left: %v", ents)
	}
	if _, err := s.Remove(context.Background(), ia.Digest); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
	_ = io.Discard
}

func TestGCKeepsLayersInUse(t *testing.T) {
	needLayerRoot(t)
	s := newOCIStore(t)
	shared := imagetest.Tar(imagetest.File("shared", "s"))
	a, _ := imagetest.Image(v1.Config{}, shared, imagetest.Tar(imagetest.File("a", "a")))
	b, _ := imagetest.Image(v1.Config{}, shared)
	var imgs []*Image
	for _, img := range []v1.Image{a, b} {
		p := filepath.Join(t.TempDir(), "x.tar")
		if err := imagetest.WriteDockerArchive(p, "x.test/x:1", img); err != nil {
			t.Fatal(err)
		}
		f, _ := os.Open(p)
		out, err := s.Import(context.Background(), f, ImportOptions{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, out)
	}
	if _, err := s.Remove(context.Background(), imgs[0].Digest); err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RemovedLayers) != 1 {
		t.Fatalf("removed %v, want only a's own layer", res.RemovedLayers)
	}
	for _, l := range imgs[1].Layers {
		if !dirExists(l) {
			t.Fatalf("layer of a live image removed: %s", l)
		}
	}
}
