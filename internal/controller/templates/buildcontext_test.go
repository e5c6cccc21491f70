package templates

import (
	"archive/tar"
	"bytes"
	"errors"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

type tarEntry struct {
	name, link string
	typ        byte
	data       string
}

func buildTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			_, _ = tw.Write([]byte(e.data))
		}
	}
	_ = tw.Close()
	return buf.Bytes()
}

var specEntry = tarEntry{name: BuildSpecEntry, typ: tar.TypeReg, data: `{"name":"t","image":"busybox"}`}

func TestReadBuildRequest(t *testing.T) {
	tests := []struct {
		name    string
		entries []tarEntry
		wantErr bool
		files   int
	}{
		{"spec only", []tarEntry{specEntry}, false, 0},
		{"context files", []tarEntry{specEntry, {name: "context/src/", typ: tar.TypeDir}, {name: "context/src/a", typ: tar.TypeReg, data: "x"}, {name: "context/l", typ: tar.TypeSymlink, link: "src/a"}}, false, 3},
		{"no spec", []tarEntry{{name: "context/a", typ: tar.TypeReg, data: "x"}}, true, 0},
		{"unknown spec field", []tarEntry{{name: BuildSpecEntry, typ: tar.TypeReg, data: `{"name":"t","bogus":1}`}}, true, 0},
		{"dot-dot", []tarEntry{specEntry, {name: "context/../etc/passwd", typ: tar.TypeReg, data: "x"}}, true, 0},
		{"absolute", []tarEntry{specEntry, {name: "context//etc/passwd", typ: tar.TypeReg, data: "x"}}, true, 0},
		{"outside context", []tarEntry{specEntry, {name: "etc/passwd", typ: tar.TypeReg, data: "x"}}, true, 0},
		{"device", []tarEntry{specEntry, {name: "context/dev", typ: tar.TypeChar}}, true, 0},
		{"hard link", []tarEntry{specEntry, {name: "context/h", typ: tar.TypeLink, link: "context/a"}}, true, 0},
		{"doubled", []tarEntry{specEntry, {name: "context/a", typ: tar.TypeReg}, {name: "context/a", typ: tar.TypeReg}}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, bc, err := ReadBuildRequest(bytes.NewReader(buildTar(t, tt.entries...)))
			if tt.wantErr {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("want invalid argument, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(bc.files) != tt.files {
				t.Fatalf("%d files, want %d", len(bc.files), tt.files)
			}
		})
	}
}

func TestSelectCopyHash(t *testing.T) {
	read := func(data string) *BuildContext {
		_, bc, err := ReadBuildRequest(bytes.NewReader(buildTar(t, specEntry,
			tarEntry{name: "context/src/a", typ: tar.TypeReg, data: data},
			tarEntry{name: "context/other", typ: tar.TypeReg, data: "o"})))
		if err != nil {
			t.Fatal(err)
		}
		return bc
	}
	files, h1, err := read("one").selectCopy("src")
	if err != nil || len(files) != 1 || files[0].name != "a" {
		t.Fatalf("selectCopy(src) = %v, %v", files, err)
	}
	_, h2, _ := read("two").selectCopy("src")
	_, h3, _ := read("one").selectCopy("src")
	if h1 == h2 || h1 != h3 {
		t.Fatalf("hash must follow content only: %s %s %s", h1, h2, h3)
	}
	if _, _, err := read("one").selectCopy("missing"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("missing src: %v", err)
	}
	if _, _, err := read("one").selectCopy("../x"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("escaping src: %v", err)
	}
}

func FuzzReadBuildRequest(f *testing.F) {
	f.Add(buildTar(f, specEntry, tarEntry{name: "context/a", typ: tar.TypeReg, data: "x"}))
	f.Add(buildTar(f, specEntry, tarEntry{name: "context/../a", typ: tar.TypeReg}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, bc, err := ReadBuildRequest(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error is not invalid_argument: %v", err)
			}
			return
		}
		if spec == nil || bc == nil {
			t.Fatal("nil result without an error")
		}
		for _, fl := range bc.files {
			if _, err := cleanContextName(fl.name); err != nil || fl.name == "" {
				t.Fatalf("accepted name %q", fl.name)
			}
		}
		_ = validateTemplateSpec(spec)
	})
}
