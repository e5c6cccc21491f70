package workspace

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/tree"
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
	changes, skipped, _, err := ChangesFromTar(bytes.NewReader(buf.Bytes()), entries, vfs.Limits{})
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
	changes, skipped, _, err = ChangesFromTar(bytes.NewReader(after), entries, vfs.Limits{})
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
	if _, _, _, err := ChangesFromTar(bytes.NewReader(big), nil, vfs.Limits{MaxBytes: 8}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("9 bytes against a quota of 8: %v", err)
	}
	if _, _, _, err := ChangesFromTar(bytes.NewReader(big), nil, vfs.Limits{MaxEntries: 1}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("2 files against a quota of 1: %v", err)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../x"} {
		_, _, _, err := ChangesFromTar(bytes.NewReader(makeTar(t, tarEntry{bad, tar.TypeReg, 0o644, "x"})), nil, vfs.Limits{})
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("path %q: %v", bad, err)
		}
	}
	dup := makeTar(t, tarEntry{"a", tar.TypeReg, 0o644, "1"}, tarEntry{"./a", tar.TypeReg, 0o644, "2"})
	if _, _, _, err := ChangesFromTar(bytes.NewReader(dup), nil, vfs.Limits{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a repeated path: %v", err)
	}
	// A file under a directory the tar never made is not kept.
	orphan := makeTar(t, tarEntry{"nodir/f", tar.TypeReg, 0o644, "1"})
	if ch, skipped, _, err := ChangesFromTar(bytes.NewReader(orphan), nil, vfs.Limits{}); err != nil || len(ch) != 0 || len(skipped) != 1 {
		t.Fatalf("orphan: %v %v %v", ch, skipped, err)
	}
}

// markedTree is a tree stream (the agent's) of files, each with its
// inode and change time, without content when unchanged.
func markedTree(t testing.TB, files ...markedFile) []byte {
	var buf bytes.Buffer
	tw, err := tree.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rec := tree.Record{Kind: tree.KindFile, Path: f.name, Mode: 0o644, Ino: f.ino, Ctime: f.ctime, Size: int64(len(f.body))}
		if f.unchanged {
			rec.Kind = tree.KindUnchanged
		}
		if err := tw.Write(rec, strings.NewReader(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type markedFile struct {
	name      string
	ino       uint64
	ctime     int64
	unchanged bool
	body      string
}

// TestReadBackUnchanged: a file marked unchanged is taken from what the
// copy held only when its inode and change time are the ones last read
// back; anything else asks for the copy whole.
func TestReadBackUnchanged(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	version := []vfs.Entry{
		{Path: "a", Mode: 0o644, Size: 3, Hash: sum("aaa")},
		{Path: "b", Mode: 0o644, Size: 3, Hash: sum("bbb")},
	}
	held := CopyOf(version)
	held["a"] = CopyEntry{Entry: version[0], Ino: 10, Ctime: 100}
	held["b"] = CopyEntry{Entry: version[1], Ino: 11, Ctime: 110}

	// a unchanged, b rewritten, c new: one change for b, one for c.
	changes, _, seen, err := ChangesFromTree(bytes.NewReader(markedTree(t,
		markedFile{"a", 10, 100, true, ""}, markedFile{"b", 11, 500, false, "BBB"}, markedFile{"c", 12, 501, false, "c"},
	)), version, held, vfs.Limits{MaxBytes: 7})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, fmt.Sprintf("%s:%d", c.Path, len(c.Data)))
	}
	if fmt.Sprint(got) != "[b:3 c:1]" {
		t.Fatalf("changes %v", got)
	}
	if seen["a"].Hash != sum("aaa") || seen["a"].Ino != 10 || seen["b"].Ctime != 500 || seen["c"].Ino != 12 {
		t.Fatalf("seen %+v", seen)
	}
	// The unchanged file's size counts against the quota.
	if _, _, _, err := ChangesFromTree(bytes.NewReader(markedTree(t, markedFile{"a", 10, 100, true, ""}, markedFile{"c", 12, 501, false, "cccc"})),
		version, held, vfs.Limits{MaxBytes: 6}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("quota with an unchanged file: %v", err)
	}
	for name, f := range map[string]markedFile{
		"another inode (a file moved over it)": {"a", 11, 100, true, ""},
		"another change time":                  {"a", 10, 101, true, ""},
		"a path the copy did not hold":         {"z", 10, 100, true, ""},
		"no inode":                             {"a", 0, 0, true, ""},
	} {
		if _, _, _, err := ChangesFromTree(bytes.NewReader(markedTree(t, f)), version, held, vfs.Limits{}); !errors.Is(err, ErrStaleCopy) {
			t.Errorf("%s: %v, want ErrStaleCopy", name, err)
		}
	}
	// Held with inodes unknown (copied in whole): nothing is vouched for.
	if _, _, _, err := ChangesFromTree(bytes.NewReader(markedTree(t, markedFile{"a", 10, 100, true, ""})), version, CopyOf(version), vfs.Limits{}); !errors.Is(err, ErrStaleCopy) {
		t.Errorf("unknown inodes: %v", err)
	}
	// Held is not the version: an unchanged mark cannot stand for it.
	other := CopyOf(version)
	other["a"] = CopyEntry{Entry: vfs.Entry{Path: "a", Mode: 0o644, Size: 1, Hash: sum("x")}, Ino: 10, Ctime: 100}
	if _, _, _, err := ChangesFromTree(bytes.NewReader(markedTree(t, markedFile{"a", 10, 100, true, ""})), version, other, vfs.Limits{}); !errors.Is(err, ErrStaleCopy) {
		t.Errorf("held not the version: %v", err)
	}
}

// TestSyncPlan: from what a copy holds to a version, only what differs
// is removed or written, and what stays keeps its inode.
func TestSyncPlan(t *testing.T) {
	held := Copy{
		"d":       {Entry: vfs.Entry{Path: "d", Dir: true, Mode: 0o755}},
		"d/x":     {Entry: vfs.Entry{Path: "d/x", Mode: 0o644, Hash: "x"}, Ino: 1, Ctime: 1},
		"d/sub":   {Entry: vfs.Entry{Path: "d/sub", Dir: true, Mode: 0o755}},
		"d/sub/y": {Entry: vfs.Entry{Path: "d/sub/y", Mode: 0o644, Hash: "y"}, Ino: 2, Ctime: 2},
		"keep":    {Entry: vfs.Entry{Path: "keep", Mode: 0o644, Hash: "k"}, Ino: 3, Ctime: 3},
		"mode":    {Entry: vfs.Entry{Path: "mode", Mode: 0o644, Hash: "m"}, Ino: 4, Ctime: 4},
		"kind":    {Entry: vfs.Entry{Path: "kind", Mode: 0o644, Hash: "f"}, Ino: 5, Ctime: 5},
	}
	target := []vfs.Entry{
		{Path: "d", Dir: true, Mode: 0o755},
		{Path: "d/x", Mode: 0o644, Hash: "x2"},
		{Path: "keep", Mode: 0o644, Hash: "k"},
		{Path: "kind", Dir: true, Mode: 0o755},
		{Path: "kind/z", Mode: 0o644, Hash: "z"},
		{Path: "mode", Mode: 0o755, Hash: "m"},
	}
	remove, write, next := SyncPlan(held, target)
	var w []string
	for _, e := range write {
		w = append(w, e.Path)
	}
	if fmt.Sprint(remove) != "[d/sub kind]" || fmt.Sprint(w) != "[d/x kind kind/z mode]" {
		t.Fatalf("remove %v, write %v", remove, w)
	}
	if len(next) != len(target) || next["keep"].Ino != 3 || next["d/x"].Ino != 0 || next["mode"].Ino != 0 {
		t.Fatalf("next %+v", next)
	}
	if remove, write, _ := SyncPlan(next, target); len(remove)+len(write) != 0 {
		t.Fatalf("a copy at the target: remove %v, write %v", remove, write)
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
		changes, _, _, err := ChangesFromTar(bytes.NewReader(data), version, vfs.Limits{MaxBytes: 1 << 16, MaxEntries: 64})
		checkChanges(t, changes, err)
	})
}

// FuzzChangesFromTree: the same for the agent's tree stream, whose files
// marked unchanged take what the copy held.
func FuzzChangesFromTree(f *testing.F) {
	f.Add(markedTree(f, markedFile{"d/old", 7, 9, true, ""}, markedFile{"d/new", 7, 9, false, "x"}))
	f.Add(markedTree(f, markedFile{"d/new", 7, 9, true, ""}))
	f.Add([]byte(tree.Magic))
	version := []vfs.Entry{{Path: "d", Dir: true, Mode: 0o755}, {Path: "d/old", Mode: 0o644, Size: 1, Hash: "h"}}
	held := CopyOf(version)
	held["d/old"] = CopyEntry{Entry: version[1], Ino: 7, Ctime: 9}
	f.Fuzz(func(t *testing.T, data []byte) {
		changes, _, _, err := ChangesFromTree(bytes.NewReader(data), version, held, vfs.Limits{MaxBytes: 1 << 16, MaxEntries: 64})
		checkChanges(t, changes, err)
	})
}

// checkChanges: the result is a set of valid, distinct paths whose
// parents are directories of the result or of the version (d), within
// the bounds, every content whole and any file without one the version's.
func checkChanges(t *testing.T, changes []vfs.Change, err error) {
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
			if c.Data == nil && (c.Path != "d/old" || c.Hash != "h") {
				t.Fatalf("%s: no content, and not the version's", c.Path)
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
