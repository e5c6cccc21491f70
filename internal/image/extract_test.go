package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
)

func needLayerRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: layers keep owners, whiteouts are device nodes and opaque dirs trusted xattrs")
	}
}

// extractInto unpacks data into <tmp>/root and returns root; the caller
// checks that nothing appeared beside it.
func extractInto(t *testing.T, data []byte) (string, ExtractStats, error) {
	t.Helper()
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := ExtractLayer(context.Background(), bytes.NewReader(data), root, ExtractOptions{MaxBytes: 1 << 20, MaxEntries: 100})
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 {
		t.Fatalf("extraction wrote outside the layer: %v", ents)
	}
	return root, st, err
}

func TestExtractRefusesHostileLayers(t *testing.T) {
	needLayerRoot(t)
	big := strings.Repeat("x", 2<<20)
	tests := []struct {
		name    string
		entries []imagetest.Entry
		want    string
	}{
		{"dotdot", []imagetest.Entry{imagetest.File("../escape", "x")}, "climbs out"},
		{"dotdot inside", []imagetest.Entry{imagetest.File("a/../../escape", "x")}, "climbs out"},
		{"absolute", []imagetest.Entry{imagetest.File("/etc/escape", "x")}, "absolute"},
		{"through symlink", []imagetest.Entry{imagetest.Symlink("evil", "/"), imagetest.File("evil/escape", "x")}, "symlink"},
		{"through relative symlink", []imagetest.Entry{imagetest.Dir("a"), imagetest.Symlink("a/up", "../../.."), imagetest.File("a/up/escape", "x")}, "outside the layer"},
		{"escaping symlink", []imagetest.Entry{imagetest.Symlink("a", "../outside")}, "outside the layer"},
		{"hard link out", []imagetest.Entry{{Name: "l", Type: tar.TypeLink, Linkname: "../../etc/passwd"}}, "hard link"},
		{"hard link to absent", []imagetest.Entry{{Name: "l", Type: tar.TypeLink, Linkname: "etc/passwd"}}, "hard link"},
		{"char device", []imagetest.Entry{{Name: "dev/mem", Type: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o600}}, "device node"},
		{"block device", []imagetest.Entry{{Name: "sda", Type: tar.TypeBlock, Devmajor: 8, Mode: 0o600}}, "device node"},
		{"too big", []imagetest.Entry{imagetest.File("big", big)}, "larger than"},
		{"file replaces dir", []imagetest.Entry{imagetest.Dir("d"), imagetest.File("d", "x")}, "replaces a directory"},
		{"bad whiteout", []imagetest.Entry{imagetest.File("a/.wh...", "")}, "malformed whiteout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := extractInto(t, imagetest.Tar(tc.entries...))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("err = %v, want an invalid-argument error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestExtractRefusesTooManyEntries(t *testing.T) {
	needLayerRoot(t)
	var es []imagetest.Entry
	for i := 0; i < 101; i++ {
		es = append(es, imagetest.Dir(strings.Repeat("d", i+1)))
	}
	if _, _, err := extractInto(t, imagetest.Tar(es...)); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Fatalf("err = %v", err)
	}
}

func TestExtractTruncatedTar(t *testing.T) {
	needLayerRoot(t)
	data := imagetest.Tar(imagetest.File("f", strings.Repeat("y", 5000)))
	if _, _, err := extractInto(t, data[:2000]); err == nil {
		t.Fatal("truncated tar accepted")
	}
}

func TestExtractWhiteoutsAndModes(t *testing.T) {
	needLayerRoot(t)
	data := imagetest.Tar(
		imagetest.Dir("./etc"),
		imagetest.File("etc/.wh.gone", ""),
		imagetest.Dir("opaque"),
		imagetest.File("opaque/.wh..wh..opq", ""),
		imagetest.Entry{Name: "bin/su", Body: "suid", Mode: 0o4755},
		imagetest.Entry{Name: "bin/sg", Body: "sgid", Mode: 0o2755},
		imagetest.Entry{Name: "shared", Type: tar.TypeDir, Mode: 0o3777},
		imagetest.File("a/file", "hello"),
		imagetest.Entry{Name: "a/link", Type: tar.TypeLink, Linkname: "a/file"},
		imagetest.Symlink("abs", "/etc/passwd"),
		imagetest.File("a/file2", "first"),
		imagetest.File("a/file2", "second"),
	)
	root, st, err := extractInto(t, data)
	if err != nil {
		t.Fatal(err)
	}
	var s unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, "etc/gone"), &s); err != nil || s.Mode&unix.S_IFMT != unix.S_IFCHR || s.Rdev != 0 {
		t.Fatalf("whiteout: %v mode %o rdev %d", err, s.Mode, s.Rdev)
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(root, "opaque"), opaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("opaque xattr: %v %q", err, buf[:n])
	}
	for _, f := range []string{"bin/su", "bin/sg"} {
		info, err := os.Lstat(filepath.Join(root, f))
		if err != nil || info.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || info.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %v %v", f, err, info.Mode())
		}
	}
	if st.Stripped != 2 {
		t.Fatalf("stripped = %d, want 2", st.Stripped)
	}
	if info, err := os.Lstat(filepath.Join(root, "shared")); err != nil || info.Mode()&os.ModeSticky == 0 || info.Mode()&os.ModeSetgid == 0 {
		t.Fatalf("sticky setgid dir: %v %v", err, info.Mode())
	}
	var a, b unix.Stat_t
	if unix.Lstat(filepath.Join(root, "a/file"), &a) != nil || unix.Lstat(filepath.Join(root, "a/link"), &b) != nil || a.Ino != b.Ino {
		t.Fatal("hard link not made")
	}
	if got, _ := os.Readlink(filepath.Join(root, "abs")); got != "/etc/passwd" {
		t.Fatalf("symlink = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "a/file2")); string(got) != "second" {
		t.Fatalf("later entry did not win: %q", got)
	}
}

func FuzzExtractLayer(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("needs root: layers keep owners and whiteouts are device nodes")
	}
	f.Add(imagetest.Tar(imagetest.File("a/b", "x"), imagetest.Symlink("l", "../x")))
	f.Add(imagetest.Tar(imagetest.Symlink("evil", "/"), imagetest.File("evil/x", "y")))
	f.Add(imagetest.Tar(imagetest.File("d/.wh.x", ""), imagetest.Entry{Name: "h", Type: tar.TypeLink, Linkname: "d/x"}))
	f.Add(append(tarsafetest.PAXSparse("big", 1<<30, []byte("x")), tarsafetest.End()...))
	f.Add(append(tarsafetest.GNUSparse("big", 1<<30, []byte("x")), tarsafetest.End()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		root := filepath.Join(parent, "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		budget := &testBudget{limit: 256 << 10}
		_, _ = ExtractLayer(context.Background(), bytes.NewReader(data), root, ExtractOptions{MaxBytes: 1 << 20, MaxEntries: 1000, Budget: budget})
		if ents, _ := os.ReadDir(parent); len(ents) != 1 {
			t.Fatalf("wrote outside the layer: %v", ents)
		}
		if info, err := os.Lstat(root); err != nil || !info.IsDir() {
			t.Fatalf("layer root replaced: %v", err)
		}
		// What is on disk is what the budget allowed, whatever the
		// headers claimed.
		var files int64
		_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if info, err := d.Info(); err == nil {
					files += info.Size()
				}
			}
			return nil
		})
		if files > budget.limit {
			t.Fatalf("%d bytes of files written with a budget of %d", files, budget.limit)
		}
	})
}

type testBudget struct{ limit, used int64 }

func (b *testBudget) Charge(n int64) error {
	if b.used+n > b.limit {
		return errdefs.ErrResourceExhausted
	}
	b.used += n
	return nil
}
