package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// bigFile is above the pool's threshold.
const bigFile = DefaultMinLinkSize * 2

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, p string, data []byte, mode os.FileMode, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func statOf(t testing.TB, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func layerDir(t testing.TB, s *Store, l Layer) string {
	t.Helper()
	p, err := s.LayerPath(l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sameInode(t testing.TB, a, b string) bool {
	t.Helper()
	sa, sb := statOf(t, a), statOf(t, b)
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func poolObjects(t testing.TB, s *Store) int {
	t.Helper()
	n := 0
	dirs, _ := os.ReadDir(s.objectsDir())
	for _, d := range dirs {
		e, _ := os.ReadDir(filepath.Join(s.objectsDir(), d.Name()))
		n += len(e)
	}
	return n
}

// TestCommitSharesUnchangedFiles: a second layer that differs from the
// first in one file links every other large file to the first layer's
// inode, adds only the changed file and its directories, and both layers
// still encode to the digests of their sources.
func TestCommitSharesUnchangedFiles(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	s := newStore(t)
	src := t.TempDir()
	mtime := time.Unix(1_700_000_000, 5)
	for _, n := range []string{"a", "b", "c", "d/e"} {
		writeFile(t, filepath.Join(src, n), randomBytes(t, bigFile), 0o644, mtime)
	}
	writeFile(t, filepath.Join(src, "small"), []byte("tiny"), 0o644, mtime)
	first := commitTree(t, s, src)
	wantFirst := digestOfDir(t, src)

	writeFile(t, filepath.Join(src, "b"), randomBytes(t, bigFile), 0o644, mtime)
	second := commitTree(t, s, src)
	wantSecond := digestOfDir(t, src)
	if first.Digest != wantFirst.Digest || second.Digest != wantSecond.Digest {
		t.Fatalf("digests: %s %s, want %s %s", first.Digest, second.Digest, wantFirst.Digest, wantSecond.Digest)
	}
	p1, p2 := layerDir(t, s, first), layerDir(t, s, second)
	for _, n := range []string{"a", "c", "d/e"} {
		if !sameInode(t, filepath.Join(p1, n), filepath.Join(p2, n)) {
			t.Errorf("%s: unchanged file is not shared", n)
		}
	}
	for _, n := range []string{"b", "small"} {
		if sameInode(t, filepath.Join(p1, n), filepath.Join(p2, n)) {
			t.Errorf("%s: changed or small file is shared", n)
		}
	}
	// The second layer added the new b and a few small inodes, not the
	// unchanged 3 * bigFile.
	if second.Added < bigFile || second.Added > bigFile+64<<10 {
		t.Errorf("second layer added %d bytes, want about %d", second.Added, bigFile)
	}
	for _, l := range []Layer{first, second} {
		if _, err := s.VerifyLayer(ctx, l.Digest); err != nil {
			t.Errorf("layer does not verify after deduplication: %v", err)
		}
		if err := s.CheckLayer(ctx, l.Digest); err != nil {
			t.Errorf("layer seal: %v", err)
		}
	}
	// Directory times survived the files being swapped for links.
	if got := statOf(t, filepath.Join(p2, "d")).Mtim; got != statOf(t, filepath.Join(src, "d")).Mtim {
		t.Errorf("directory time changed by linking: %v", got)
	}
	// The store counts shared files once.
	if u := s.DiskUsage(); u > 5*bigFile+128<<10 {
		t.Errorf("disk usage %d counts shared files more than once (5 files of %d stored)", u, bigFile)
	}
}

// TestObjectKeyCoversMetadata: files equal in content but not in what a
// layer keeps of their inode are never one inode.
func TestObjectKeyCoversMetadata(t *testing.T) {
	requireRoot(t)
	data := randomBytes(t, bigFile)
	mtime := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name   string
		change func(t *testing.T, p string)
		shared bool
	}{
		{"identical", func(*testing.T, string) {}, true},
		{"content", func(t *testing.T, p string) {
			writeFile(t, p, append(bytes.Clone(data[:len(data)-1]), data[len(data)-1]^1), 0o644, mtime)
		}, false},
		{"mode", func(t *testing.T, p string) { os.Chmod(p, 0o600) }, false},
		{"setuid", func(t *testing.T, p string) { unix.Chmod(p, 0o4755) }, false},
		{"owner", func(t *testing.T, p string) { os.Lchown(p, 1000, -1); unix.Chmod(p, 0o644) }, false},
		{"group", func(t *testing.T, p string) { os.Lchown(p, -1, 1000); unix.Chmod(p, 0o644) }, false},
		{"mtime", func(t *testing.T, p string) { os.Chtimes(p, mtime, mtime.Add(time.Nanosecond)) }, false},
		{"user xattr", func(t *testing.T, p string) { unix.Setxattr(p, "user.k", []byte("v"), 0) }, false},
		{"capability", func(t *testing.T, p string) {
			// A valid v2 capability set: cap_net_bind_service permitted.
			cap := []byte{0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			if err := unix.Setxattr(p, "security.capability", cap, 0); err != nil {
				t.Skipf("cannot set a file capability here: %v", err)
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			src := t.TempDir()
			p := filepath.Join(src, "f")
			writeFile(t, p, data, 0o644, mtime)
			first := commitTree(t, s, src)
			tc.change(t, p)
			os.Chtimes(src, mtime, mtime)
			second := commitTree(t, s, src)
			if tc.shared != (first.Digest == second.Digest) {
				t.Fatalf("layers equal = %v, want %v", first.Digest == second.Digest, tc.shared)
			}
			if tc.shared {
				return
			}
			if sameInode(t, filepath.Join(layerDir(t, s, first), "f"), filepath.Join(layerDir(t, s, second), "f")) {
				t.Fatal("files that differ in what the layer keeps share an inode")
			}
		})
	}
}

// TestNoSharedInodeInsideOneSandbox: equal files within one layer, and a
// layer's files against the layers it is stacked on, are never one inode,
// or a sandbox would see them as hard links to each other.
func TestNoSharedInodeInsideOneSandbox(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	data := randomBytes(t, bigFile)
	mtime := time.Unix(1_700_000_000, 0)
	pooled := t.TempDir()
	writeFile(t, filepath.Join(pooled, "x"), data, 0o644, mtime)
	base := commitTree(t, s, pooled) // the pool now holds data

	twins := t.TempDir()
	writeFile(t, filepath.Join(twins, "one"), data, 0o644, mtime)
	writeFile(t, filepath.Join(twins, "two"), data, 0o644, mtime)
	l := commitTree(t, s, twins)
	p := layerDir(t, s, l)
	if sameInode(t, filepath.Join(p, "one"), filepath.Join(p, "two")) {
		t.Error("two files of one layer share an inode")
	}
	// The next layer with the same twins shares both of them, one each.
	writeFile(t, filepath.Join(twins, "three"), randomBytes(t, bigFile), 0o644, mtime)
	again := commitTree(t, s, twins)
	q := layerDir(t, s, again)
	if sameInode(t, filepath.Join(q, "one"), filepath.Join(q, "two")) {
		t.Error("two files of the next layer share an inode")
	}
	for _, n := range []string{"one", "two"} {
		if !sameInode(t, filepath.Join(q, n), filepath.Join(p, "one")) && !sameInode(t, filepath.Join(q, n), filepath.Join(p, "two")) {
			t.Errorf("%s of the next layer is not shared with the layer before", n)
		}
	}
	if again.Added > bigFile+64<<10 {
		t.Errorf("the next layer added %d bytes, want about one new file (%d)", again.Added, bigFile)
	}

	// Stacked on base, a copy of base's x under another name stays apart.
	above := t.TempDir()
	writeFile(t, filepath.Join(above, "copy-of-x"), data, 0o644, mtime)
	writeFile(t, filepath.Join(above, "other"), randomBytes(t, bigFile), 0o644, mtime)
	tmp, err := s.Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := CopyTree(context.Background(), above, tmp, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	top, err := s.CommitOn(context.Background(), tmp, []string{base.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if sameInode(t, filepath.Join(layerDir(t, s, base), "x"), filepath.Join(layerDir(t, s, top), "copy-of-x")) {
		t.Error("a layer shares an inode with a layer it is stacked on")
	}
}

// TestRemoveLayerCollectsObjects: an object goes when the last layer
// linking it goes, and not before.
func TestRemoveLayerCollectsObjects(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	src := t.TempDir()
	mtime := time.Unix(1_700_000_000, 0)
	writeFile(t, filepath.Join(src, "shared"), randomBytes(t, bigFile), 0o644, mtime)
	writeFile(t, filepath.Join(src, "own"), randomBytes(t, bigFile), 0o644, mtime)
	a := commitTree(t, s, src)
	writeFile(t, filepath.Join(src, "own"), randomBytes(t, bigFile), 0o644, mtime)
	b := commitTree(t, s, src)
	if n := poolObjects(t, s); n != 3 {
		t.Fatalf("pool holds %d objects, want 3 (shared, a's own, b's own)", n)
	}
	if err := s.RemoveLayer(a.Digest); err != nil {
		t.Fatal(err)
	}
	if n := poolObjects(t, s); n != 2 {
		t.Fatalf("after removing a: %d objects, want 2", n)
	}
	if _, err := s.VerifyLayer(context.Background(), b.Digest); err != nil {
		t.Fatalf("b after removing a: %v", err)
	}
	if err := s.RemoveLayer(b.Digest); err != nil {
		t.Fatal(err)
	}
	if n := poolObjects(t, s); n != 0 {
		t.Fatalf("after removing both: %d objects left", n)
	}
	if u := s.DiskUsage(); u != 0 {
		t.Errorf("empty store uses %d bytes", u)
	}
}

// TestCrashLeftovers: what a kill at any point of a commit leaves (a
// temporary layer, possibly with files already linked into the pool, or a
// removed layer half deleted) is cleared by the next Open and the first
// collection, and the pool never names an incomplete object.
func TestCrashLeftovers(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "snaps")
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), randomBytes(t, bigFile), 0o644, time.Unix(1_700_000_000, 0))
	kept := commitTree(t, s, src)
	// A commit killed after publishing its objects, before its rename.
	tmp, err := s.Temp()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "g"), randomBytes(t, bigFile), 0o644, time.Unix(1_700_000_000, 0))
	if err := CopyTree(context.Background(), src, tmp, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	dd := &deduper{s: s, min: s.minLink, taken: map[inode]bool{}}
	if _, _, err := commitWalk(context.Background(), tmp, dd); err != nil {
		t.Fatal(err)
	}
	dd.publish(tmp)
	if n := poolObjects(t, s); n != 2 {
		t.Fatalf("pool before the restart: %d objects, want 2", n)
	}

	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := os.ReadDir(s2.tmpDir()); len(e) != 0 {
		t.Fatalf("temporary layers survived Open: %d", len(e))
	}
	g := s2.BeginCollection()
	got, err := g.RemoveUnused(map[string]bool{kept.Digest: true})
	g.End()
	if err != nil || got.Objects != 1 || len(got.Layers) != 0 {
		t.Fatalf("first collection: %+v %v; want one orphaned object removed", got, err)
	}
	bad, err := s2.CheckPool(context.Background())
	if err != nil || len(bad) != 0 {
		t.Fatalf("pool check: %v %v", bad, err)
	}
	if _, err := s2.VerifyLayer(context.Background(), kept.Digest); err != nil {
		t.Fatal(err)
	}
}

// TestHoldKeepsLayers: a held layer is neither removed nor collected; a
// collection that began while it was held keeps it even after the lease
// ends; holding a missing layer fails and holds nothing.
func TestHoldKeepsLayers(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), randomBytes(t, bigFile), 0o644, time.Unix(1_700_000_000, 0))
	l := commitTree(t, s, src)
	missing := "sha256:" + strings.Repeat("0", 64)
	if _, err := s.Hold(l.Digest, missing); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "missing from disk") {
		t.Fatalf("hold of a missing layer: %v", err)
	}
	if s.lease.holds[l.Digest] != 0 {
		t.Fatal("a failed hold kept a lease")
	}

	release, err := s.Hold(l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveLayer(l.Digest); !errors.Is(err, ErrLayerHeld) || !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("remove of a held layer: %v", err)
	}
	g := s.BeginCollection()
	release()
	release() // a second call is harmless
	got, err := g.RemoveUnused(nil)
	g.End()
	if err != nil || len(got.Layers) != 0 || len(got.Held) != 1 || !s.HasLayer(l.Digest) {
		t.Fatalf("collection begun during the lease: %+v %v", got, err)
	}
	if n := poolObjects(t, s); n != 1 {
		t.Fatalf("the held layer's object went: %d objects", n)
	}
	g = s.BeginCollection()
	got, err = g.RemoveUnused(nil)
	g.End()
	if err != nil || len(got.Layers) != 1 || s.HasLayer(l.Digest) || poolObjects(t, s) != 0 {
		t.Fatalf("collection after the lease: %+v %v", got, err)
	}
}

// TestCheckLayerSeal: the seal catches files lost, added, resized,
// re-moded or re-timed on disk; content changed at the same size is left
// to VerifyLayer. A layer without a seal is sealed on its first check.
func TestCheckLayerSeal(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		damage func(t *testing.T, p string)
		sealed bool // the seal catches it
	}{
		{"removed", func(t *testing.T, p string) { os.Remove(filepath.Join(p, "dir/a")) }, true},
		{"added", func(t *testing.T, p string) { os.WriteFile(filepath.Join(p, "new"), nil, 0o644) }, true},
		{"truncated", func(t *testing.T, p string) { os.Truncate(filepath.Join(p, "dir/a"), 10) }, true},
		{"chmod", func(t *testing.T, p string) { os.Chmod(filepath.Join(p, "small"), 0o777) }, true},
		{"chown", func(t *testing.T, p string) { os.Lchown(filepath.Join(p, "small"), 7, 7) }, true},
		{"same size", func(t *testing.T, p string) {
			f, err := os.OpenFile(filepath.Join(p, "small"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("X"), 0)
			f.Close()
			os.Chtimes(filepath.Join(p, "small"), time.Unix(1_700_000_000, 0), time.Unix(1_700_000_000, 0))
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			src := t.TempDir()
			mtime := time.Unix(1_700_000_000, 0)
			writeFile(t, filepath.Join(src, "dir/a"), randomBytes(t, bigFile), 0o644, mtime)
			writeFile(t, filepath.Join(src, "small"), []byte("small file"), 0o644, mtime)
			os.Chtimes(filepath.Join(src, "dir"), mtime, mtime)
			l := commitTree(t, s, src)
			p := layerDir(t, s, l)
			if err := s.CheckLayer(ctx, l.Digest); err != nil {
				t.Fatal(err)
			}
			dirTime := statOf(t, filepath.Join(p, "dir")).Mtim
			tc.damage(t, p)
			// Only the file itself was damaged, not its directory's time.
			unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(p, "dir"), []unix.Timespec{dirTime, dirTime}, 0)
			err := s.CheckLayer(ctx, l.Digest)
			if tc.sealed {
				if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "changed on disk") {
					t.Fatalf("damage not caught by the seal: %v", err)
				}
			} else if err != nil {
				t.Fatalf("seal: %v", err)
			}
			if _, err := s.VerifyLayer(ctx, l.Digest); !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("VerifyLayer after damage: %v", err)
			}
		})
	}
	t.Run("unsealed", func(t *testing.T) {
		s := newStore(t)
		src := t.TempDir()
		writeFile(t, filepath.Join(src, "f"), []byte("x"), 0o644, time.Unix(1_700_000_000, 0))
		l := commitTree(t, s, src)
		p := layerDir(t, s, l)
		if err := unix.Removexattr(p, sealXattr); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckLayer(ctx, l.Digest); err != nil {
			t.Fatal(err)
		}
		if v, _ := readSeal(p); !strings.HasPrefix(v, sealVersion) {
			t.Fatalf("an unsealed layer was not sealed on check: %q", v)
		}
		os.Remove(filepath.Join(p, "f"))
		if err := s.CheckLayer(ctx, l.Digest); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("damage after sealing: %v", err)
		}
	})
}

// TestImportFailureRemovesAddedLayers: an import whose second layer is
// corrupt removes the first layer if the import added it, keeps it if it
// was stored before, and leaves no pool objects of its own behind.
func TestImportFailureRemovesAddedLayers(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	mtime := time.Unix(1_700_000_000, 0)
	lower, upper := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(lower, "lib/a"), randomBytes(t, bigFile), 0o644, mtime)
	topData := randomBytes(t, bigFile)
	writeFile(t, filepath.Join(upper, "b"), topData, 0o644, mtime)
	from := newStore(t)
	l1 := commitTree(t, from, lower)
	tmp, err := from.Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := CopyTree(ctx, upper, tmp, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	l2, err := from.CommitOn(ctx, tmp, []string{l1.Digest})
	if err != nil {
		t.Fatal(err)
	}
	m := Manifest{ImageDigest: "sha256:" + strings.Repeat("ab", 32), CreatedAt: mtime, Layers: []Layer{{Digest: l1.Digest}, {Digest: l2.Digest}}}
	var file bytes.Buffer
	if err := from.Export(ctx, m, "", &file); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()
	off := bytes.Index(good, topData)
	if off < 0 {
		t.Fatal("second layer's content not found in the export")
	}
	bad := bytes.Clone(good)
	bad[off+len(topData)/2] ^= 1

	t.Run("first layer new", func(t *testing.T) {
		to := newStore(t)
		if _, err := to.Import(ctx, bytes.NewReader(bad), Limits{}); !errors.Is(err, ErrChecksum) {
			t.Fatalf("want a checksum error, got %v", err)
		}
		if ls, _ := to.Layers(); len(ls) != 0 {
			t.Errorf("the failed import left layers: %v", ls)
		}
		if n := poolObjects(t, to); n != 0 {
			t.Errorf("the failed import left %d pool objects", n)
		}
		if e, _ := os.ReadDir(to.tmpDir()); len(e) != 0 {
			t.Errorf("the failed import left %d temporary directories", len(e))
		}
	})
	t.Run("first layer stored before", func(t *testing.T) {
		to := newStore(t)
		before := commitTree(t, to, lower)
		if before.Digest != l1.Digest {
			t.Fatal("the same tree committed to another digest")
		}
		if _, err := to.Import(ctx, bytes.NewReader(bad), Limits{}); !errors.Is(err, ErrChecksum) {
			t.Fatalf("want a checksum error, got %v", err)
		}
		if ls, _ := to.Layers(); len(ls) != 1 || ls[0] != l1.Digest {
			t.Errorf("layers after the failed import: %v, want only the one stored before", ls)
		}
		if _, err := to.VerifyLayer(ctx, l1.Digest); err != nil {
			t.Error(err)
		}
	})
	t.Run("good file", func(t *testing.T) {
		to := newStore(t)
		got, err := to.Import(ctx, bytes.NewReader(good), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range got.Layers {
			if l.Added <= 0 {
				t.Errorf("layer %s: added %d bytes, want > 0", l.Digest, l.Added)
			}
			if _, err := to.VerifyLayer(ctx, l.Digest); err != nil {
				t.Error(err)
			}
		}
		// Importing it again adds nothing.
		again, err := to.Import(ctx, bytes.NewReader(good), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range again.Layers {
			if l.Added != 0 {
				t.Errorf("a second import of %s added %d bytes", l.Digest, l.Added)
			}
		}
	})
}
