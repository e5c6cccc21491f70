package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: whiteouts are device nodes and owners are kept")
	}
}

// makeTree builds an overlay upper directory with every kind of entry a
// snapshot keeps, plus ones it must leave out.
func makeTree(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(d, "home/user/proj"), 0o755))
	must(os.WriteFile(filepath.Join(d, "home/user/proj/a.txt"), []byte("hello"), 0o640))
	must(os.Chown(filepath.Join(d, "home/user/proj/a.txt"), 1000, 1000))
	must(unix.Chmod(filepath.Join(d, "home/user/proj/a.txt"), 0o4750))
	must(os.Symlink("/etc/shadow", filepath.Join(d, "home/user/link")))
	must(unix.Mknod(filepath.Join(d, "home/user/gone"), unix.S_IFCHR, 0))
	must(os.Mkdir(filepath.Join(d, "opaque"), 0o700))
	must(unix.Setxattr(filepath.Join(d, "opaque"), opaqueXattr, []byte("y"), 0))
	must(unix.Setxattr(filepath.Join(d, "home/user/proj/a.txt"), "user.note", []byte("kept"), 0))
	must(unix.Mkfifo(filepath.Join(d, "fifo"), 0o600))
	must(os.Mkdir(filepath.Join(d, ".paddock"), 0o700))
	old := time.Unix(1_600_000_000, 123456789)
	must(os.Chtimes(filepath.Join(d, "home/user/proj"), old, old))
	return d
}

func digestOfDir(t *testing.T, dir string) Layer {
	t.Helper()
	l, err := digestTree(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCopyTreeKeepsEverything(t *testing.T) {
	requireRoot(t)
	src := makeTree(t)
	dst := t.TempDir()
	if err := CopyTree(context.Background(), src, dst, TreeOptions{SkipTop: []string{".paddock"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dst, ".paddock")); err == nil {
		t.Error("skipped top entry was copied")
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); err == nil {
		t.Error("FIFO was copied")
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dst, "home/user/gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("whiteout not kept: %v %o", err, st.Mode)
	}
	if err := unix.Lstat(filepath.Join(dst, "home/user/proj/a.txt"), &st); err != nil || st.Uid != 1000 || st.Mode&0o7777 != 0o4750 {
		t.Errorf("owner or mode not kept: uid %d mode %o", st.Uid, st.Mode&0o7777)
	}
	buf := make([]byte, 8)
	if n, err := unix.Getxattr(filepath.Join(dst, "opaque"), opaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque marker not kept: %v", err)
	}
	if n, err := unix.Getxattr(filepath.Join(dst, "home/user/proj/a.txt"), "user.note", buf); err != nil || string(buf[:n]) != "kept" {
		t.Errorf("user xattr not kept: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "home/user/link")); err != nil || target != "/etc/shadow" {
		t.Errorf("symlink: %q %v", target, err)
	}
	// The copy encodes to the same bytes as the original minus what was
	// left out: remove those and compare digests.
	os.Remove(filepath.Join(src, "fifo"))
	os.Remove(filepath.Join(src, ".paddock"))
	old := time.Unix(1_600_000_000, 0)
	os.Chtimes(src, old, old)
	os.Chtimes(dst, old, old)
	if a, b := digestOfDir(t, src), digestOfDir(t, dst); a != b {
		t.Errorf("digest differs after copy: %v vs %v", a, b)
	}
}

func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return b.Bytes()
}

func TestExtractRefusesEscapes(t *testing.T) {
	requireRoot(t)
	reg := func(name string) *tar.Header { return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: 1} }
	tests := []struct {
		name string
		hdrs []*tar.Header
	}{
		{"dotdot", []*tar.Header{reg("../x")}},
		{"inner dotdot", []*tar.Header{{Typeflag: tar.TypeDir, Name: "a/"}, reg("a/../../x")}},
		{"absolute", []*tar.Header{reg("/etc/x")}},
		{"symlink then write", []*tar.Header{{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/tmp"}, reg("l/x")}},
		{"symlink replaced by file", []*tar.Header{{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/tmp/x"}, reg("l")}},
		{"hardlink out", []*tar.Header{{Typeflag: tar.TypeLink, Name: "h", Linkname: "../../etc/passwd"}}},
		{"device node", []*tar.Header{{Typeflag: tar.TypeChar, Name: "mem", Devmajor: 1, Devminor: 1}}},
		{"block device", []*tar.Header{{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}}},
		{"fifo", []*tar.Header{{Typeflag: tar.TypeFifo, Name: "p"}}},
		{"parent missing", []*tar.Header{reg("a/b")}},
		{"duplicate", []*tar.Header{reg("a"), reg("a")}},
		{"foreign xattr", []*tar.Header{{Typeflag: tar.TypeReg, Name: "a", Format: tar.FormatPAX, PAXRecords: map[string]string{"SCHILY.xattr.security.selinux": "x"}}}},
		{"opaque on file", []*tar.Header{{Typeflag: tar.TypeReg, Name: "a", Format: tar.FormatPAX, PAXRecords: map[string]string{"SCHILY.xattr.trusted.overlay.opaque": "y"}}}},
		{"short capability", []*tar.Header{{Typeflag: tar.TypeReg, Name: "a", Format: tar.FormatPAX, PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "xx"}}}},
		{"capability of the wrong size", []*tar.Header{{Typeflag: tar.TypeReg, Name: "a", Format: tar.FormatPAX,
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x00\x00\x00\x02" + strings.Repeat("\x00", 12)}}}},
		{"capability of no revision", []*tar.Header{{Typeflag: tar.TypeReg, Name: "a", Format: tar.FormatPAX,
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x00\x00\x00\x09" + strings.Repeat("\x00", 16)}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "in")
			os.Mkdir(dir, 0o755)
			err := Extract(context.Background(), bytes.NewReader(tarOf(t, tc.hdrs...)), dir, Limits{})
			if !errors.Is(err, ErrUnsafeArchive) || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("want an unsafe-archive error, got %v", err)
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Errorf("something was created beside the target: %v", entries)
			}
		})
	}
}

func TestExtractLimits(t *testing.T) {
	dir := t.TempDir()
	data := tarOf(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a", Size: 100})
	if err := Extract(context.Background(), bytes.NewReader(data), dir, Limits{MaxBytes: 10}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("byte limit: %v", err)
	}
	data = tarOf(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a", Size: 1}, &tar.Header{Typeflag: tar.TypeReg, Name: "b", Size: 1})
	if err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), Limits{MaxEntries: 1}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("entry limit: %v", err)
	}
}

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Options{Dir: filepath.Join(t.TempDir(), "snaps")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func commitTree(t *testing.T, s *Store, src string) Layer {
	t.Helper()
	tmp, err := s.Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := CopyTree(context.Background(), src, tmp, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := s.Commit(context.Background(), tmp)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCommitDeduplicates(t *testing.T) {
	requireRoot(t)
	s := newStore(t)
	src := makeTree(t)
	os.Remove(filepath.Join(src, "fifo"))
	a := commitTree(t, s, src)
	b := commitTree(t, s, src)
	if a.Digest != b.Digest || a.Size != b.Size {
		t.Fatalf("same tree, different layers: %v %v", a, b)
	}
	if a.Added <= 0 || b.Added != 0 {
		t.Errorf("added bytes: first commit %d (want > 0), second %d (want 0)", a.Added, b.Added)
	}
	ls, _ := s.Layers()
	if len(ls) != 1 {
		t.Errorf("want one stored layer, have %v", ls)
	}
	if entries, _ := os.ReadDir(s.tmpDir()); len(entries) != 0 {
		t.Errorf("temporary layers left: %d", len(entries))
	}
}

func TestExportImport(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	src := makeTree(t)
	os.Remove(filepath.Join(src, "fifo"))
	from := newStore(t)
	l := commitTree(t, from, src)
	m := Manifest{Name: "deps", Image: "base", ImageDigest: "sha256:" + strings.Repeat("ab", 32), CreatedAt: time.Unix(1_700_000_000, 0).UTC(), Layers: []Layer{{Digest: l.Digest}}}
	var file bytes.Buffer
	if err := from.Export(ctx, m, "", &file); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()

	to := newStore(t)
	got, err := to.Import(ctx, bytes.NewReader(good), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "deps" || len(got.Layers) != 1 || got.Layers[0].Digest != l.Digest || !to.HasLayer(l.Digest) {
		t.Fatalf("imported %+v", got)
	}

	// Find the layer's bytes to damage them.
	off := bytes.Index(good, []byte("hello"))
	if off < 0 {
		t.Fatal("file content not found in export")
	}
	flipped := bytes.Clone(good)
	flipped[off] ^= 1
	bad := []struct {
		name string
		data []byte
	}{
		{"corrupted", flipped},
		{"truncated", good[:len(good)/2]},
		{"tampered manifest size", bytes.Replace(bytes.Clone(good), []byte(`"size": `), []byte(`"size":  `), 1)},
		{"empty", nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			to := newStore(t)
			_, err := to.Import(ctx, bytes.NewReader(tc.data), Limits{})
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("want a refusal, got %v", err)
			}
			if ls, _ := to.Layers(); len(ls) != 0 {
				t.Errorf("a refused file left layers: %v", ls)
			}
		})
	}
	t.Run("corrupted says checksum", func(t *testing.T) {
		_, err := newStore(t).Import(ctx, bytes.NewReader(flipped), Limits{})
		if !errors.Is(err, ErrChecksum) {
			t.Errorf("want ErrChecksum, got %v", err)
		}
	})
}

func TestLayerMissingFromDisk(t *testing.T) {
	s := newStore(t)
	_, err := s.LayerPath("sha256:" + strings.Repeat("0", 64))
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "missing from disk") {
		t.Errorf("got %v", err)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(tarOfF(&tar.Header{Typeflag: tar.TypeDir, Name: "a/", Mode: 0o755}, &tar.Header{Typeflag: tar.TypeReg, Name: "a/b", Size: 3, Mode: 0o644}))
	f.Add(tarOfF(&tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/"}, &tar.Header{Typeflag: tar.TypeReg, Name: "l/x", Size: 1}))
	f.Add(tarOfF(&tar.Header{Typeflag: tar.TypeChar, Name: "w"}, &tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "w"}))
	f.Add([]byte("not a tar"))
	f.Add(append(tarsafetest.PAXSparse("big", 1<<30, []byte("x")), tarsafetest.End()...))
	f.Add(append(tarsafetest.GNUSparse("big", 1<<30, []byte("x")), tarsafetest.End()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "in")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		const maxBytes = 1 << 20
		_ = Extract(context.Background(), bytes.NewReader(data), dir, Limits{MaxEntries: 1000, MaxBytes: maxBytes})
		entries, _ := os.ReadDir(parent)
		if len(entries) != 1 {
			t.Fatalf("extraction escaped its directory: %v", entries)
		}
		// The bound holds for what is on disk, whatever headers claim.
		var files int64
		filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				files += fi.Size()
			}
			return nil
		})
		if files > maxBytes {
			t.Fatalf("%d bytes of files written with a bound of %d", files, maxBytes)
		}
		// Nothing may be a device other than a whiteout.
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode()&os.ModeDevice != 0 {
				if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Rdev != 0 {
					t.Fatalf("device node created: %s", p)
				}
			}
			return nil
		})
	})
}

// memorySeed is a snapshot file with an empty layer and one memory file.
func memorySeed() []byte {
	layer := tarOfF()
	ls := sha256.Sum256(layer)
	mem := []byte("memory")
	ms := sha256.Sum256(mem)
	m := Manifest{Format: ArchiveFormat, ImageDigest: "sha256:" + strings.Repeat("a", 64),
		Layers: []Layer{{Digest: "sha256:" + hex.EncodeToString(ls[:]), Size: int64(len(layer))}},
		Memory: &MemoryImage{Meta: []byte("{}"), Seal: "x", Files: []MemoryFile{{Name: "pages.img", Size: int64(len(mem)), SHA256: hex.EncodeToString(ms[:])}}}}
	mb, _ := json.Marshal(m)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct {
		name string
		data []byte
	}{{manifestName, mb}, {layerEntry(m.Layers[0].Digest), layer}, {memoryEntry("pages.img"), mem}} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data))})
		tw.Write(e.data)
	}
	tw.Close()
	return b.Bytes()
}

func tarOfF(hdrs ...*tar.Header) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		tw.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return b.Bytes()
}

func FuzzImport(f *testing.F) {
	f.Add([]byte{})
	f.Add(tarOfF(&tar.Header{Typeflag: tar.TypeReg, Name: "manifest.json", Size: 2}))
	f.Add([]byte(`{"format":"paddock-snapshot/v1"}`))
	f.Add(append(tarsafetest.PAXSparse(manifestName, 1<<30, []byte("{}")), tarsafetest.End()...))
	f.Add(memorySeed())
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Open(Options{Dir: filepath.Join(t.TempDir(), "s")})
		if err != nil {
			t.Fatal(err)
		}
		memDir := t.TempDir()
		st, err := s.Stage(context.Background(), bytes.NewReader(data), Limits{MaxEntries: 100, MaxBytes: 1 << 20}, memDir)
		if err != nil {
			return
		}
		// Memory files land only in their directory, by the names listed.
		if mi := st.Manifest().Memory; mi != nil {
			ents, _ := os.ReadDir(memDir)
			if len(ents) != len(mi.Files) {
				t.Fatalf("%d memory files staged for %d listed", len(ents), len(mi.Files))
			}
		}
		m, err := st.Commit(context.Background())
		if err != nil {
			return
		}
		// Whatever was accepted is stored under the digests it claims.
		for _, l := range m.Layers {
			if _, err := s.VerifyLayer(context.Background(), l.Digest); err != nil {
				t.Fatalf("accepted layer does not verify: %v", err)
			}
		}
	})
}

// archiveOf builds an exported snapshot file around layer tars whose
// digests and sizes the manifest states truthfully: the checksums pass, so
// only the extractor's own rules stand between the file and the host.
func archiveOf(t *testing.T, layers ...[]byte) []byte {
	t.Helper()
	m := Manifest{Format: ArchiveFormat, ImageDigest: "sha256:" + strings.Repeat("a", 64), CreatedAt: time.Unix(1, 0).UTC()}
	for _, l := range layers {
		sum := sha256.Sum256(l)
		m.Layers = append(m.Layers, Layer{Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(l))})
	}
	mb, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	write := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	write(manifestName, mb)
	for i, l := range layers {
		write(layerEntry(m.Layers[i].Digest), l)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImportRefusesEscapingLayers: a snapshot file whose checksums are
// all correct is still refused when a layer would escape the store, and
// leaves no layer and nothing beside the store.
func TestImportRefusesEscapingLayers(t *testing.T) {
	requireRoot(t)
	reg := func(name string) *tar.Header { return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: 1} }
	good := tarOf(t, &tar.Header{Typeflag: tar.TypeDir, Name: "home/", Mode: 0o755}, reg("home/ok"))
	for _, tc := range []struct {
		name string
		hdrs []*tar.Header
	}{
		{"dotdot", []*tar.Header{reg("../../escaped")}},
		{"absolute", []*tar.Header{reg("/tmp/escaped")}},
		{"symlink then write", []*tar.Header{{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/tmp"}, reg("l/escaped")}},
		{"hardlink out", []*tar.Header{{Typeflag: tar.TypeLink, Name: "h", Linkname: "../../../etc/passwd"}}},
		{"device node", []*tar.Header{{Typeflag: tar.TypeChar, Name: "mem", Devmajor: 1, Devminor: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			before, err := s.Layers()
			if err != nil {
				t.Fatal(err)
			}
			// The hostile layer sits above a good one, so the import has
			// already added a layer when it meets it.
			_, err = s.Import(context.Background(), bytes.NewReader(archiveOf(t, good, tarOf(t, tc.hdrs...))), Limits{})
			if !errors.Is(err, ErrUnsafeArchive) {
				t.Fatalf("import = %v, want an unsafe-archive error", err)
			}
			after, err := s.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before) {
				t.Fatalf("layers after a refused import: %v (before %v)", after, before)
			}
			for _, d := range []string{s.Dir(), filepath.Dir(s.Dir()), "/tmp"} {
				if _, err := os.Lstat(filepath.Join(d, "escaped")); err == nil {
					t.Fatalf("a file was written outside the layer: %s", filepath.Join(d, "escaped"))
				}
			}
		})
	}
}
