package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

type tarEntry struct {
	name string
	typ  byte
	mode int64
	body string
}

func makeTar(t testing.TB, entries ...tarEntry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), ModTime: time.Now()}
		if e.typ == tar.TypeSymlink {
			hdr.Linkname, hdr.Size = "/etc/passwd", 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// TestCopyOutAndBack writes a version as a tar, reads it back unchanged
// (no change, whatever the times), then as a container would leave it.
func TestCopyOutAndBack(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "c", 0, 0)
	edit(t, s, r, func(tr *vfs.Tree) {
		tr.Mkdir("src", 0o755)
		write(t, tr, "src/a.go", "package a")
		write(t, tr, "keep.txt", "same")
	})
	_, ix, _ := s.Head(t.Context(), r.ID)
	entries := ix.Entries()
	var buf bytes.Buffer
	if err := s.WriteTar(&buf, entries); err != nil {
		t.Fatal(err)
	}
	changes, skipped, err := ChangesFromTar(bytes.NewReader(buf.Bytes()), entries, vfs.Limits{})
	if err != nil || len(changes) != 0 || len(skipped) != 0 {
		t.Fatalf("the version read back as changes %v, skipped %v, %v", changes, skipped, err)
	}
	after := makeTar(t,
		tarEntry{"keep.txt", tar.TypeReg, 0o644, "same"},
		tarEntry{"src/", tar.TypeDir, 0o755, ""},
		tarEntry{"src/a.go", tar.TypeReg, 0o644, "package a // edited"},
		tarEntry{"bin/", tar.TypeDir, 0o755, ""},
		tarEntry{"bin/tool", tar.TypeReg, 0o755, "#!/bin/sh"},
		tarEntry{"link", tar.TypeSymlink, 0o777, ""},
	)
	changes, skipped, err = ChangesFromTar(bytes.NewReader(after), entries, vfs.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, fmt.Sprintf("%s:%v:%d", c.Path, c.Removed, len(c.Data)))
	}
	if fmt.Sprint(got) != "[src/a.go:false:19 bin:false:0 bin/tool:false:9]" || fmt.Sprint(skipped) != "[link]" {
		t.Fatalf("changes %v, skipped %v", got, skipped)
	}
	v, _, err := s.Apply(t.Context(), Commit{Workspace: r.ID, Base: 1, Changes: changes})
	if err != nil || v != 2 {
		t.Fatalf("apply: %d %v", v, err)
	}
	if read(t, s, r, "bin/tool") != "#!/bin/sh" {
		t.Fatal("bin/tool did not land")
	}
}

func TestChangesFromTarBounds(t *testing.T) {
	big := makeTar(t, tarEntry{"a", tar.TypeReg, 0o644, "12345"}, tarEntry{"b", tar.TypeReg, 0o644, "6789"})
	if _, _, err := ChangesFromTar(bytes.NewReader(big), nil, vfs.Limits{MaxBytes: 8}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("9 bytes against a quota of 8: %v", err)
	}
	if _, _, err := ChangesFromTar(bytes.NewReader(big), nil, vfs.Limits{MaxEntries: 1}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("2 files against a quota of 1: %v", err)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../x"} {
		_, _, err := ChangesFromTar(bytes.NewReader(makeTar(t, tarEntry{bad, tar.TypeReg, 0o644, "x"})), nil, vfs.Limits{})
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("path %q: %v", bad, err)
		}
	}
	dup := makeTar(t, tarEntry{"a", tar.TypeReg, 0o644, "1"}, tarEntry{"./a", tar.TypeReg, 0o644, "2"})
	if _, _, err := ChangesFromTar(bytes.NewReader(dup), nil, vfs.Limits{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a repeated path: %v", err)
	}
	// A file under a directory the tar never made is not kept.
	orphan := makeTar(t, tarEntry{"nodir/f", tar.TypeReg, 0o644, "1"})
	if ch, skipped, err := ChangesFromTar(bytes.NewReader(orphan), nil, vfs.Limits{}); err != nil || len(ch) != 0 || len(skipped) != 1 {
		t.Fatalf("orphan: %v %v %v", ch, skipped, err)
	}
}

// FuzzChangesFromTar: whatever a sandbox sends, the result is a set of
// valid, distinct paths whose parents are directories of the result or
// of the version, within the bounds, or an error.
func FuzzChangesFromTar(f *testing.F) {
	f.Add(makeTar(f, tarEntry{"d/", tar.TypeDir, 0o755, ""}, tarEntry{"d/f", tar.TypeReg, 0o644, "x"}))
	f.Add(makeTar(f, tarEntry{"../x", tar.TypeReg, 0o644, "x"}))
	f.Add([]byte("not a tar"))
	version := []vfs.Entry{{Path: "d", Dir: true, Mode: 0o755}, {Path: "d/old", Mode: 0o644, Size: 1, Hash: "h"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		changes, _, err := ChangesFromTar(bytes.NewReader(data), version, vfs.Limits{MaxBytes: 1 << 16, MaxEntries: 64})
		if err != nil {
			return
		}
		dirs := map[string]bool{".": true, "d": true}
		seen := map[string]bool{}
		var bytes int64
		for _, c := range changes {
			if seen[c.Path] {
				t.Fatalf("path %q twice", c.Path)
			}
			seen[c.Path] = true
			switch {
			case c.Dir && !c.Removed:
				dirs[c.Path] = true
			case c.Removed || !c.Dir:
				delete(dirs, c.Path)
			}
			if !c.Removed && !c.Dir {
				bytes += c.Size
				if c.Data != nil && int64(len(c.Data)) != c.Size {
					t.Fatalf("%s: %d bytes, size %d", c.Path, len(c.Data), c.Size)
				}
			}
		}
		if bytes > 1<<16 {
			t.Fatalf("%d bytes past the bound", bytes)
		}
		for _, c := range changes {
			if !c.Removed && !validChild(c.Path, dirs) {
				t.Fatalf("%s: parent is no directory of the result", c.Path)
			}
		}
	})
}

func validChild(p string, dirs map[string]bool) bool {
	i := len(p) - 1
	for i >= 0 && p[i] != '/' {
		i--
	}
	if i < 0 {
		return true
	}
	return dirs[p[:i]]
}
