package vfs

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Index is a version's entries arranged for Trees: by path, and each
// directory's children by name. It is read-only once made, so one Index
// serves every command that starts from its version.
type Index struct {
	entries []Entry
	// byPath is each entry's place in entries.
	byPath   map[string]int
	children map[string][]string // directory path ("." for the root) to sorted names
	bytes    int64
	root     Entry
}

// NewIndex arranges a version's entries (any order; the parents of every
// entry must be among them).
func NewIndex(entries []Entry) (*Index, error) {
	ix := &Index{
		entries:  slices.Clone(entries),
		byPath:   make(map[string]int, len(entries)),
		children: map[string][]string{".": nil},
		root:     Entry{Path: ".", Dir: true, Mode: 0o755},
	}
	slices.SortFunc(ix.entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	kept := ix.entries[:0]
	for _, e := range ix.entries {
		if e.Path == "." {
			ix.root = e
			continue
		}
		if !fs.ValidPath(e.Path) {
			return nil, fmt.Errorf("workspace entry %q: not a valid path", e.Path)
		}
		if _, dup := ix.byPath[e.Path]; dup {
			return nil, fmt.Errorf("workspace entry %q: listed twice", e.Path)
		}
		dir := path.Dir(e.Path)
		if _, ok := ix.children[dir]; !ok {
			return nil, fmt.Errorf("workspace entry %q: its parent is not a directory of the version", e.Path)
		}
		e.Mode = e.Mode.Perm()
		ix.children[dir] = append(ix.children[dir], path.Base(e.Path))
		if e.Dir {
			ix.children[e.Path] = nil
		} else {
			ix.bytes += e.Size
		}
		ix.byPath[e.Path] = len(kept)
		kept = append(kept, e)
	}
	ix.entries = kept
	return ix, nil
}

// WithFiles returns the Index of the version that differs from ix only
// in the given files, each of which ix holds as a file, or false when
// any is not such a file (the caller makes a NewIndex instead). The
// paths are those of ix, so its path map and directories are shared,
// and a command that changed a few files of a large version costs a
// copy of the entries, not a new sort.
func (ix *Index) WithFiles(files []Entry) (*Index, bool) {
	next := &Index{
		entries:  slices.Clone(ix.entries),
		byPath:   ix.byPath,
		children: ix.children,
		bytes:    ix.bytes,
		root:     ix.root,
	}
	for _, f := range files {
		i, ok := next.byPath[f.Path]
		if !ok || next.entries[i].Dir || f.Dir {
			return nil, false
		}
		f.Mode = f.Mode.Perm()
		next.bytes += f.Size - next.entries[i].Size
		next.entries[i] = f
	}
	return next, true
}

// Entry is the entry at p.
func (ix *Index) Entry(p string) (Entry, bool) {
	i, ok := ix.byPath[p]
	if !ok {
		return Entry{}, false
	}
	return ix.entries[i], true
}

// Entries are the version's entries sorted by path (shared: not to be
// changed).
func (ix *Index) Entries() []Entry { return ix.entries }
