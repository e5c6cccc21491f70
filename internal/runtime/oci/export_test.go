package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExportTree makes real overlayfs changes (a deletion, an opaque
// directory, a symlink, a FIFO) and checks the exported tar.
func TestExportTree(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	lower, upper, work, merged := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")
	for _, d := range []string{lower, upper, work, merged, filepath.Join(lower, "d"), filepath.Join(lower, "keep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"gone", "d/old", "keep/same"} {
		if err := os.WriteFile(filepath.Join(lower, f), []byte("lower"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := mountOverlay([]string{lower}, upper, work, merged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmount(merged) })

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(merged, "gone")))
	must(os.RemoveAll(filepath.Join(merged, "d")))
	must(os.Mkdir(filepath.Join(merged, "d"), 0o750))
	must(os.WriteFile(filepath.Join(merged, "d", "new"), []byte("hello"), 0o600))
	must(os.Symlink("/etc/shadow", filepath.Join(merged, "link")))
	must(unix.Mkfifo(filepath.Join(merged, "fifo"), 0o644))
	must(os.MkdirAll(filepath.Join(merged, ".paddock", "run"), 0o755))
	must(unmount(merged))

	var buf bytes.Buffer
	if err := exportTree(context.Background(), upper, &buf, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("exportTree: %v", err)
	}
	got := map[string]*tar.Header{}
	bodies := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = h
		bodies[h.Name] = string(b)
	}
	tests := []struct {
		name     string
		typ      byte
		body     string
		linkname string
	}{
		{".wh.gone", tar.TypeReg, "", ""},
		{"d/", tar.TypeDir, "", ""},
		{"d/.wh..wh..opq", tar.TypeReg, "", ""},
		{"d/new", tar.TypeReg, "hello", ""},
		{"link", tar.TypeSymlink, "", "/etc/shadow"},
	}
	for _, tt := range tests {
		h := got[tt.name]
		if h == nil {
			t.Errorf("missing %q in export; got %v", tt.name, names(got))
			continue
		}
		if h.Typeflag != tt.typ || bodies[tt.name] != tt.body || h.Linkname != tt.linkname {
			t.Errorf("%q: type %c body %q link %q; want %c %q %q", tt.name, h.Typeflag, bodies[tt.name], h.Linkname, tt.typ, tt.body, tt.linkname)
		}
	}
	for _, absent := range []string{"fifo", ".paddock/", ".paddock/run/", "keep/", "keep/same"} {
		if got[absent] != nil {
			t.Errorf("%q must not be exported", absent)
		}
	}
	if h := got["d/new"]; h != nil && h.Mode != 0o600 {
		t.Errorf("d/new mode %o, want 600", h.Mode)
	}
}

func names(m map[string]*tar.Header) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestExportTreeRefusesSymlinkRoot checks the walk does not start
// through a symlink planted where the upper directory should be.
func TestExportTreeRefusesSymlinkRoot(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "upper")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := exportTree(context.Background(), link, io.Discard, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("exportTree followed a symlinked root")
	}
}
