package workspace

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

func putFile(t *testing.T, s *Store, r Record, p, data string, mode uint32, base int64) (*api.WorkspaceRunResult, error) {
	t.Helper()
	r, err := s.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return s.WriteFile(context.Background(), FileWrite{Workspace: r, Caller: "local", Path: p, Data: strings.NewReader(data), Mode: fsMode(mode), Base: base})
}

func readFile(t *testing.T, s *Store, r Record, p string, version int64) (File, error) {
	t.Helper()
	r, err := s.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return s.ReadFile(context.Background(), r, version, p)
}

// TestWriteFileAndReadItBack: a write makes its parents and lands as one
// version named in the history; a read gives the content, mode and
// version, of the current version or an older one.
func TestWriteFileAndReadItBack(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "files", 0, 0)
	res, err := putFile(t, s, r, "src/app/main.py", "print(1)\n", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || res.BaseVersion != 0 || res.Executor != ExecutorFiles || len(res.Changes) != 3 {
		t.Fatalf("first write: %+v", res)
	}
	if _, err := putFile(t, s, r, "src/app/main.py", "print(2)\n", 0o755, -1); err != nil {
		t.Fatal(err)
	}
	f, err := readFile(t, s, r, "src/app/main.py", -1)
	if err != nil || string(f.Data) != "print(2)\n" || f.Version != 2 || f.Entry.Mode != 0o755 {
		t.Fatalf("read of the current version: %+v %q, %v", f.Entry, f.Data, err)
	}
	// A rewrite without a mode keeps the file's.
	if _, err := putFile(t, s, r, "src/app/main.py", "print(3)\n", 0, -1); err != nil {
		t.Fatal(err)
	}
	if f, _ := readFile(t, s, r, "src/app/main.py", -1); f.Entry.Mode != 0o755 || f.Version != 3 {
		t.Fatalf("mode after a rewrite without one: %o, version %d", f.Entry.Mode, f.Version)
	}
	if f, err := readFile(t, s, r, "src/app/main.py", 1); err != nil || string(f.Data) != "print(1)\n" || f.Version != 1 || f.Entry.Mode != 0o644 {
		t.Fatalf("read of version 1: %+v %q, %v", f.Entry, f.Data, err)
	}
	// The same content again changes nothing.
	res, err = putFile(t, s, r, "src/app/main.py", "print(3)\n", 0, -1)
	if err != nil || res.Version != 3 || len(res.Changes) != 0 {
		t.Fatalf("an unchanged write: %+v, %v", res, err)
	}
	vs, err := s.Versions(context.Background(), r.ID, 10)
	if err != nil || len(vs) != 3 || vs[0].Command != "write src/app/main.py" || vs[0].Executor != ExecutorFiles {
		t.Fatalf("history: %+v, %v", vs, err)
	}
}

// TestFileRoutesRefuse: what the file routes refuse, and that a refused
// write lands nothing.
func TestFileRoutesRefuse(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "refuse", 64, 10)
	if _, err := putFile(t, s, r, "d/f", "x", 0, -1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, data string
		want             error
	}{
		{"absolute", "/etc/passwd", "x", errdefs.ErrInvalidArgument},
		{"dot-dot", "../x", "x", errdefs.ErrInvalidArgument},
		{"root", ".", "x", errdefs.ErrInvalidArgument},
		{"empty", "", "x", errdefs.ErrInvalidArgument},
		{"a directory", "d", "x", errdefs.ErrInvalidArgument},
		{"under a file", "d/f/g", "x", errdefs.ErrInvalidArgument},
		{"past the quota", "big", strings.Repeat("b", 65), errdefs.ErrResourceExhausted},
	} {
		if _, err := putFile(t, s, r, c.path, c.data, 0, -1); !errors.Is(err, c.want) {
			t.Errorf("write %s (%q): %v, want %v", c.name, c.path, err, c.want)
		}
	}
	for _, c := range []struct {
		name, path string
		version    int64
		want       error
	}{
		{"missing", "nope", -1, errdefs.ErrNotFound},
		{"a directory", "d", -1, errdefs.ErrInvalidArgument},
		{"absolute", "/d/f", -1, errdefs.ErrInvalidArgument},
		{"a version not made yet", "d/f", 9, errdefs.ErrInvalidArgument},
		{"missing at version 0", "d/f", 0, errdefs.ErrNotFound},
	} {
		if _, err := readFile(t, s, r, c.path, c.version); !errors.Is(err, c.want) {
			t.Errorf("read %s (%q at %d): %v, want %v", c.name, c.path, c.version, err, c.want)
		}
	}
	if got, _ := s.Get(context.Background(), r.ID); got.Head != 1 {
		t.Fatalf("refused writes made versions: head %d", got.Head)
	}
}

// TestWriteFileOnABase: a write on the version its writer read lands if
// no later version changed that file, and is a conflict otherwise.
func TestWriteFileOnABase(t *testing.T) {
	s := openStore(t, "")
	r := newWorkspace(t, s, "base", 0, 0)
	if _, err := putFile(t, s, r, "a", "1", 0, -1); err != nil { // version 1
		t.Fatal(err)
	}
	if _, err := putFile(t, s, r, "b", "1", 0, -1); err != nil { // version 2
		t.Fatal(err)
	}
	res, err := putFile(t, s, r, "a", "2", 0, 1) // b changed since 1, a did not
	if err != nil || res.BaseVersion != 1 || res.Version != 3 {
		t.Fatalf("write of a on base 1: %+v, %v", res, err)
	}
	if f, _ := readFile(t, s, r, "b", -1); string(f.Data) != "1" {
		t.Fatalf("b after a write of a on an older base: %q", f.Data)
	}
	if _, err := putFile(t, s, r, "a", "3", 0, 2); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("write of a on base 2 after version 3 changed it: %v, want a conflict", err)
	}
	if _, err := putFile(t, s, r, "a", "3", 0, 7); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("write on a base past the head: %v", err)
	}
	if f, _ := readFile(t, s, r, "a", -1); string(f.Data) != "2" || f.Version != 3 {
		t.Fatalf("a after the conflict: %q at %d", f.Data, f.Version)
	}
	// The head cache follows a write made on an older base.
	_, ix, _ := s.Head(context.Background(), r.ID)
	db, _ := s.entriesAt(context.Background(), s.r, r.ID, 3)
	fresh, _ := vfs.NewIndex(db)
	if len(ix.Entries()) != len(fresh.Entries()) {
		t.Fatalf("cached head %v, database %v", ix.Entries(), fresh.Entries())
	}
}

func fsMode(m uint32) fs.FileMode { return fs.FileMode(m) }
