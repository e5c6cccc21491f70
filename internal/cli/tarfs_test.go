package cli

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "a.txt"), "A")
	mustWrite(t, filepath.Join(src, "d", "e", "f.txt"), "F")
	if err := os.Chmod(filepath.Join(src, "a.txt"), 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../outside", filepath.Join(src, "d", "up")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeTarDir(&buf, src, "top", io.Discard); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	want := "top/ top/a.txt top/d/ top/d/e/ top/d/e/f.txt top/d/up"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("names = %q, want %q", got, want)
	}
	dst := t.TempDir()
	if err := extractTar(bytes.NewReader(buf.Bytes()), dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "top", "d", "e", "f.txt")); err != nil || string(b) != "F" {
		t.Fatalf("f.txt: %q %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(dst, "top", "a.txt")); err != nil || st.Mode().Perm() != 0o751 {
		t.Fatalf("a.txt mode: %v %v", st, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "top", "d", "up")); err != nil || l != "../../outside" {
		t.Fatalf("symlink: %q %v", l, err)
	}
}

type entry struct {
	name, link string
	typ        byte
	data       string
}

func makeTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.data); e.typ == tar.TypeReg && err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractTarRefusesEscapes(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
	}{
		{"dotdot", []entry{{name: "../evil", typ: tar.TypeReg, data: "x"}}},
		{"nested dotdot", []entry{{name: "a/../../evil", typ: tar.TypeReg, data: "x"}}},
		{"through a symlink to outside", []entry{
			{name: "link", link: "../victim", typ: tar.TypeSymlink},
			{name: "link/evil", typ: tar.TypeReg, data: "x"},
		}},
		{"through an absolute symlink", []entry{
			{name: "abs", link: "/", typ: tar.TypeSymlink},
			{name: "abs/evil", typ: tar.TypeReg, data: "x"},
		}},
		{"hard link to outside", []entry{{name: "h", link: "../victim/file", typ: tar.TypeLink}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dst := filepath.Join(base, "dst")
			victim := filepath.Join(base, "victim")
			mustWrite(t, filepath.Join(victim, "file"), "keep")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := extractTar(bytes.NewReader(makeTar(t, tt.entries...)), dst); err == nil {
				t.Fatal("an escaping archive was extracted without an error")
			}
			for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(victim, "evil"), "/evil"} {
				if _, err := os.Lstat(p); err == nil {
					t.Fatalf("%s was written outside the target", p)
				}
			}
		})
	}
}

func TestExtractTarDoesNotWriteThroughExistingSymlink(t *testing.T) {
	base := t.TempDir()
	dst := filepath.Join(base, "dst")
	mustWrite(t, filepath.Join(dst, "inside"), "keep")
	if err := os.Symlink("inside", filepath.Join(dst, "f")); err != nil {
		t.Fatal(err)
	}
	if err := extractTar(bytes.NewReader(makeTar(t, entry{name: "f", typ: tar.TypeReg, data: "new"})), dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "inside")); string(b) != "keep" {
		t.Fatalf("the symlink's target was overwritten: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "f")); string(b) != "new" {
		t.Fatalf("f = %q", b)
	}
}

func FuzzExtractTar(f *testing.F) {
	f.Add(makeTar(f, entry{name: "a/b", typ: tar.TypeReg, data: "x"}, entry{name: "l", link: "a", typ: tar.TypeSymlink}))
	f.Add(makeTar(f, entry{name: "../x", typ: tar.TypeReg, data: "x"}))
	f.Add(makeTar(f, entry{name: "s", link: "..", typ: tar.TypeSymlink}, entry{name: "s/x", typ: tar.TypeReg}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		dst := filepath.Join(base, "dst")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = extractTar(bytes.NewReader(data), dst)
		ents, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			t.Fatalf("extraction wrote outside its directory: %v", ents)
		}
	})
}

func FuzzParseCpArgs(f *testing.F) {
	f.Add("./a", "dev:/b")
	f.Add("dev:x", "/y")
	f.Fuzz(func(t *testing.T, a, b string) {
		s, d, err := parseCpArgs(a, b)
		if err != nil {
			return
		}
		if (s.sandbox == "") == (d.sandbox == "") {
			t.Fatalf("accepted %q %q with sandboxes %q %q", a, b, s.sandbox, d.sandbox)
		}
		for _, x := range []cpArg{s, d} {
			if x.path == "" || strings.ContainsRune(x.path, 0) || (x.sandbox != "" && !refRE.MatchString(x.sandbox)) {
				t.Fatalf("accepted bad side %+v", x)
			}
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512M", "1.5GiB", "0", "9e99", "1" + strings.Repeat("0", 400) + "T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSizeMiB("memory", s)
		if err == nil && (n < 1 || n > maxSizeMiB) {
			t.Fatalf("%q -> %d out of bounds", s, n)
		}
	})
}
