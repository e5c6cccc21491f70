package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

func exported(t testing.TB, s *Store, r Record) []byte {
	var buf bytes.Buffer
	rec, err := s.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Export(context.Background(), rec, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExportImportKeepsHistory(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "src", 0, 0)
	edit(t, s, r, func(tr *vfs.Tree) { tr.Mkdir("d", 0o755); write(t, tr, "d/a", "one"); write(t, tr, "b", "bee") })
	edit(t, s, r, func(tr *vfs.Tree) { write(t, tr, "d/a", "two"); tr.Remove("b") })
	edit(t, s, r, func(tr *vfs.Tree) { tr.Remove("d/a"); tr.Remove("d"); write(t, tr, "d", "now a file") })
	file := exported(t, s, r)

	dst := openStore(t, "")
	got, err := dst.Import(context.Background(), Record{ID: "wcopy", Name: "copy", Owner: "k1"}, bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if got.Head != 3 || got.Files != 1 || got.Bytes != 10 {
		t.Fatalf("imported record %+v", got)
	}
	for v := int64(0); v <= 3; v++ {
		a, _ := s.entriesAt(context.Background(), s.r, r.ID, v)
		b, _ := dst.entriesAt(context.Background(), dst.r, "wcopy", v)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("version %d differs:\n%v\n%v", v, a, b)
		}
	}
	hist, _ := dst.Versions(context.Background(), "wcopy", 10)
	if len(hist) != 3 || hist[2].Command != "edit" {
		t.Fatalf("imported history %+v", hist)
	}
	if read(t, dst, got, "d") != "now a file" {
		t.Fatal("imported content")
	}
}

// rewrite changes an export's members through fn (name, body) and
// returns the new file.
func rewrite(t *testing.T, file []byte, fn func(name string, body []byte) (string, []byte, bool)) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(file))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		body, _ := io.ReadAll(tr)
		name, body, keep := fn(hdr.Name, body)
		if !keep {
			continue
		}
		tw.WriteHeader(&tar.Header{Name: name, Size: int64(len(body)), Mode: 0o644, Typeflag: tar.TypeReg})
		tw.Write(body)
	}
	tw.Close()
	return out.Bytes()
}

func TestImportRefusesBadExports(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "src", 0, 0)
	edit(t, s, r, func(tr *vfs.Tree) { tr.Mkdir("d", 0o755); write(t, tr, "d/a", "one") })
	edit(t, s, r, func(tr *vfs.Tree) { write(t, tr, "d/a", "two") })
	file := exported(t, s, r)
	manifestEdit := func(old, new string) []byte {
		return rewrite(t, file, func(n string, b []byte) (string, []byte, bool) {
			if n == manifestName {
				b = []byte(strings.Replace(string(b), old, new, 1))
			}
			return n, b, true
		})
	}
	cases := map[string][]byte{
		"garbage":         []byte("not a tar at all"),
		"content changed": rewrite(t, file, func(n string, b []byte) (string, []byte, bool) { return n, bytes.ToUpper(b), true }),
		"content missing": rewrite(t, file, func(n string, b []byte) (string, []byte, bool) { return n, b, !strings.HasPrefix(n, "contents/") }),
		"member outside": rewrite(t, file, func(n string, b []byte) (string, []byte, bool) {
			return strings.Replace(n, "contents/", "../", 1), b, true
		}),
		"path escapes":      manifestEdit(`"path":"d/a"`, `"path":"../a"`),
		"orphan entry":      manifestEdit(`"path":"d/a"`, `"path":"e/a"`),
		"head beyond":       manifestEdit(`"head":2`, `"head":5`),
		"unknown field":     manifestEdit(`"format"`, `"evil":1,"format"`),
		"overlapping lives": manifestEdit(`"since":2`, `"since":1`),
	}
	for name, data := range cases {
		_, err := s.Import(context.Background(), Record{ID: "w" + strings.ReplaceAll(name, " ", ""), Name: strings.ReplaceAll(name, " ", "-"), Owner: "k"}, bytes.NewReader(data))
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	list, _ := s.List(context.Background())
	if len(list) != 1 {
		t.Fatalf("%d workspaces after refused imports, want 1", len(list))
	}
	// Quota: the last version must fit the new workspace's.
	if _, err := s.Import(context.Background(), Record{ID: "wsmall", Name: "small", Owner: "k", MaxBytes: 2}, bytes.NewReader(file)); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("import past the quota: %v", err)
	}
}

// FuzzManifest checks an export's manifest as Import does (the rest of
// Import is SQLite, too slow to fuzz under coverage): whatever it
// accepts is a history whose every version is a tree.
func FuzzManifest(f *testing.F) {
	f.Add(`{"format":"paddock-workspace/1","head":2,"versions":[{"version":1},{"version":2}],"entries":[` +
		`{"path":"d","since":1,"dir":true,"mode":493,"mtime":0},{"path":"d/a","since":1,"until":2,"mode":420,"size":1,"mtime":0,"hash":"` + strings.Repeat("a", 64) + `"},` +
		`{"path":"d/a","since":2,"mode":420,"size":2,"mtime":0,"hash":"` + strings.Repeat("b", 64) + `"}]}`)
	f.Add(`{"format":"paddock-workspace/1","head":0}`)
	f.Fuzz(func(t *testing.T, data string) {
		var m manifest
		if json.Unmarshal([]byte(data), &m) != nil {
			return
		}
		if _, _, _, err := checkManifest(&m); err != nil {
			return
		}
		for v := int64(1); v <= m.Head; v++ {
			var ents []vfs.Entry
			for _, e := range m.Entries {
				if e.Since <= v && (e.Until == 0 || e.Until > v) {
					ents = append(ents, vfs.Entry{Path: e.Path, Dir: e.Dir, Hash: e.Hash, Size: e.Size})
				}
			}
			if _, err := vfs.New(ents, nil, vfs.Limits{}); err != nil {
				t.Fatalf("accepted a history whose version %d is no tree: %v", v, err)
			}
		}
	})
}
