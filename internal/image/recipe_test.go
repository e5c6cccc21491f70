package image

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// fakeDebianBuilds replaces the Debian builders of s with one that writes
// a file saying which build it is, and counts the builds.
func fakeDebianBuilds(s *Store, builds *atomic.Int32) {
	for _, name := range []string{NameBase, NameCodeInterpreter} {
		s.builders[name] = func(ctx context.Context, rootfs string, p Progress) error {
			n := builds.Add(1)
			if err := os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(rootfs, "etc", "build"), []byte{byte('0' + n)}, 0o644)
		}
	}
}

// A store shared between versions of Paddock (or a test image cache kept
// across changes of the image's definition) must not hand out an image
// built from another definition: it is built again, and the old layer
// stays for whoever pinned its digest.
func TestImageFromAnotherDefinitionIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var builds atomic.Int32
	s := newTestStore(t, dir)
	fakeDebianBuilds(s, &builds)
	first, err := s.Ensure(ctx, NameBase, nil)
	if err != nil {
		t.Fatal(err)
	}
	if img, err := s.Ensure(ctx, NameBase, nil); err != nil || img.Digest != first.Digest || builds.Load() != 1 {
		t.Fatalf("Ensure of a current image: %v, %v, %d builds", img, err, builds.Load())
	}

	// The record as a version before definitions were recorded wrote it.
	refPath := filepath.Join(dir, "refs", NameBase+".json")
	data, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec, "recipe")
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(refPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s = newTestStore(t, dir)
	fakeDebianBuilds(s, &builds)
	if _, err := s.Resolve(ctx, NameBase); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "another definition") {
		t.Fatalf("Resolve of an image of another definition = %v; want ErrNotFound saying why", err)
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("List shows a stale image: %+v", list)
	}
	second, err := s.Ensure(ctx, NameBase, nil)
	if err != nil || builds.Load() != 2 {
		t.Fatalf("Ensure of a stale image: %v, %d builds; want a rebuild", err, builds.Load())
	}
	if second.Digest == first.Digest {
		t.Fatalf("the rebuild kept the old layer %s", first.Digest)
	}
	if img, err := s.Resolve(ctx, first.Digest); err != nil || img.Digest != first.Digest {
		t.Fatalf("the old layer by its digest: %v, %v; want it kept for sandboxes pinned to it", img, err)
	}

	// Another suite is another definition too.
	other, err := New(Options{Dir: dir, Logger: testLogger(t), Suite: "trixie"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Resolve(ctx, NameBase); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Resolve from a store of another suite = %v; want ErrNotFound", err)
	}
	if img, err := s.Resolve(ctx, NameBase); err != nil || img.Digest != second.Digest {
		t.Fatalf("Resolve after the rebuild: %v, %v", img, err)
	}
}

func TestDebianRecipes(t *testing.T) {
	base, ci := debianImages[0], debianImages[1]
	if base.name != NameBase || ci.name != NameCodeInterpreter {
		t.Fatalf("debianImages = %+v", debianImages)
	}
	// The code-interpreter image is base and more, so what base promises
	// holds there too.
	for _, p := range base.packages {
		if !slices.Contains(ci.packages, p) {
			t.Errorf("code-interpreter lacks base's %s", p)
		}
	}
	for _, p := range []string{"sudo", "python-is-python3", "python3-pip", "git", "curl"} {
		if !slices.Contains(base.packages, p) {
			t.Errorf("base lacks %s", p)
		}
	}
	r := base.recipe(DefaultSuite)
	if !validDigest(r) || r == ci.recipe(DefaultSuite) || r == base.recipe("trixie") || r != base.recipe(DefaultSuite) {
		t.Fatalf("recipes do not tell definitions apart: %s", r)
	}
	more := debianImage{name: NameBase, packages: append(append([]string(nil), base.packages...), "jq")}
	if more.recipe(DefaultSuite) == r {
		t.Fatal("adding a package keeps the recipe")
	}
}

// TestStoreDirPrivate: only root passes into the store, whatever mode its
// directory had (its layers hold images' setuid programs with their owners).
func TestStoreDirPrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Dir: dir, Logger: testLogger(t)}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("store directory mode %#o, want 0700", fi.Mode().Perm())
	}
}
