package vfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Entry describes one file or directory of a workspace version.
type Entry struct {
	// Path is the io/fs path ("." is the root, which is never listed).
	Path string
	Dir  bool
	// Mode holds the permission bits only.
	Mode    fs.FileMode
	Size    int64
	ModTime time.Time
	// Hash is the SHA-256 of a file's content, hex; empty for directories.
	Hash string
}

// Content reads a file's content by its hash, from the version a Tree
// starts from. The bytes returned are never written to (a Tree copies
// them before a change), so a Content may hand out a cached slice.
type Content func(hash string) ([]byte, error)

// Limits bound a workspace. Zero means no limit.
type Limits struct {
	// MaxBytes bounds the sum of the sizes of its files.
	MaxBytes int64
	// MaxEntries bounds the number of its files and directories.
	MaxEntries int64
}

// Change is one path a command changed: Removed, or its new Entry (and,
// for a file whose content changed, Data, whose hash is Entry.Hash).
type Change struct {
	Entry
	Removed bool
	// Data is a file's content when the command read or wrote it and its
	// hash is not the one the version had at this path; nil otherwise (a
	// chmod, a touch, a directory, or a file renamed unread, whose content
	// the version already holds under its hash).
	Data []byte
}

// Tree is an FS held in memory over a version: the version's Index gives
// the shape, a directory's nodes are made when something first looks in
// it, contents are read on first use, and every change stays in the Tree
// until Changes is asked. A command that touches one file of a large
// workspace costs what that file's path costs.
type Tree struct {
	mu      sync.Mutex
	root    *node
	content Content
	lim     Limits
	ix      *Index
	bytes   int64
	entries int64
	changed bool
	now     func() time.Time
}

type node struct {
	dir     bool
	mode    fs.FileMode
	modTime time.Time
	// children of a directory, by name; made from the Index on first use
	// while lazy.
	children map[string]*node
	lazy     bool
	// src is the node's path in the version ("" for one the command
	// made): where a lazy directory's children are in the Index.
	src string
	// A file's content: hash of the version's content until it is
	// loaded (data nil, loaded false) or written (dirty).
	hash   string
	size   int64
	data   []byte
	loaded bool
	// owned: data is this node's own copy (not the Content's slice).
	owned bool
	// dirty: content written since the version; hash is stale.
	dirty bool
}

var _ FS = (*Tree)(nil)

// New returns a Tree over a version's entries (NewIndex), reading file
// contents with content (nil when no entry is a file). New(nil, nil,
// Limits{}) is an empty workspace.
func New(entries []Entry, content Content, lim Limits) (*Tree, error) {
	ix, err := NewIndex(entries)
	if err != nil {
		return nil, err
	}
	return FromIndex(ix, content, lim), nil
}

// FromIndex returns a Tree over an indexed version.
func FromIndex(ix *Index, content Content, lim Limits) *Tree {
	return &Tree{
		root:    &node{dir: true, mode: ix.root.Mode.Perm(), modTime: ix.root.ModTime, lazy: true, src: "."},
		content: content,
		lim:     lim,
		ix:      ix,
		bytes:   ix.bytes,
		entries: int64(len(ix.entries)),
		now:     time.Now,
	}
}

// kids are a directory's children, made from the Index on first use
// (t.mu held).
func (t *Tree) kids(n *node) map[string]*node {
	if !n.lazy {
		return n.children
	}
	names := t.ix.children[n.src]
	n.children = make(map[string]*node, len(names))
	for _, name := range names {
		p := name
		if n.src != "." {
			p = n.src + "/" + name
		}
		e, _ := t.ix.Entry(p)
		n.children[name] = &node{dir: e.Dir, mode: e.Mode, modTime: e.ModTime, hash: e.Hash, size: e.Size, src: p, lazy: e.Dir}
	}
	n.lazy = false
	return n.children
}

// Usage is the Tree's bytes of file content and number of entries.
func (t *Tree) Usage() (bytes, entries int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes, t.entries
}

// lookup finds name's node (t.mu held).
func (t *Tree) lookup(name string) (*node, error) {
	if name == "." {
		return t.root, nil
	}
	n := t.root
	for part := range strings.SplitSeq(name, "/") {
		if !n.dir {
			return nil, ErrNotDir
		}
		c, ok := t.kids(n)[part]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parentOf finds the directory that holds name and name's last element
// (t.mu held).
func (t *Tree) parentOf(op, name string) (*node, string, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	p, err := t.lookup(path.Dir(name))
	if err == nil && !p.dir {
		err = ErrNotDir
	}
	if err != nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: err}
	}
	return p, path.Base(name), nil
}

func (t *Tree) find(op, name string) (*node, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	n, err := t.lookup(name)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return n, nil
}

// Stat implements FS.
func (t *Tree) Stat(name string) (fs.FileInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.find("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(path.Base(name)), nil
}

// ReadDir implements FS.
func (t *Tree) ReadDir(name string) ([]fs.DirEntry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.find("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: ErrNotDir}
	}
	kids := t.kids(n)
	out := make([]fs.DirEntry, 0, len(kids))
	for child, c := range kids {
		out = append(out, fs.FileInfoToDirEntry(c.info(child)))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// ReadFile implements FS: the content is not copied.
func (t *Tree) ReadFile(name string) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.find("read", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: ErrIsDir}
	}
	if err := t.load(n); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	// A later write copies (own) or grows the slice; this one stays as it is.
	n.owned = false
	return n.data[:len(n.data):len(n.data)], nil
}

// Open implements FS.
func (t *Tree) Open(name string) (io.ReadCloser, error) {
	return t.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile implements FS.
func (t *Tree) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	n, err := t.lookup(name)
	switch {
	case err == nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case err == fs.ErrNotExist && flag&os.O_CREATE != 0:
		parent, base, perr := t.parentOf("open", name)
		if perr != nil {
			return nil, perr
		}
		if err := t.admit(0, 1); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		n = &node{mode: perm.Perm(), modTime: t.now(), loaded: true, owned: true, dirty: true}
		t.kids(parent)[base] = n
		parent.modTime = n.modTime
		t.entries++
		t.changed = true
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	writes := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if n.dir {
		if writes {
			return nil, &fs.PathError{Op: "open", Path: name, Err: ErrIsDir}
		}
		return &handle{t: t, n: n, name: name}, nil
	}
	if writes && flag&os.O_TRUNC != 0 && n.size > 0 {
		if err := t.truncate(n, 0); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
	return &handle{t: t, n: n, name: name, read: flag&os.O_WRONLY == 0, write: writes, append: flag&os.O_APPEND != 0}, nil
}

// admit checks that the Tree may grow by bytes and entries (t.mu held).
func (t *Tree) admit(bytes, entries int64) error {
	if t.lim.MaxBytes > 0 && bytes > 0 && t.bytes+bytes > t.lim.MaxBytes {
		return fmt.Errorf("workspace quota of %d bytes reached: %w", t.lim.MaxBytes, ErrQuota)
	}
	if t.lim.MaxEntries > 0 && entries > 0 && t.entries+entries > t.lim.MaxEntries {
		return fmt.Errorf("workspace quota of %d files and directories reached: %w", t.lim.MaxEntries, ErrQuota)
	}
	return nil
}

// load makes n's content present (t.mu held).
func (t *Tree) load(n *node) error {
	if n.loaded {
		return nil
	}
	if t.content == nil {
		return fmt.Errorf("workspace content %s: no content source", n.hash)
	}
	b, err := t.content(n.hash)
	if err != nil {
		return err
	}
	if int64(len(b)) != n.size {
		return fmt.Errorf("workspace content %s: %d bytes, the version says %d", n.hash, len(b), n.size)
	}
	n.data, n.loaded = b, true
	return nil
}

// own makes n's data its own copy before a change (t.mu held).
func (t *Tree) own(n *node) error {
	if err := t.load(n); err != nil {
		return err
	}
	if !n.owned {
		n.data = slices.Clone(n.data)
		n.owned = true
	}
	return nil
}

func (t *Tree) touched(n *node) {
	n.dirty = true
	n.modTime = t.now()
	t.changed = true
}

// truncate sets n's size (t.mu held; growth already admitted).
func (t *Tree) truncate(n *node, size int64) error {
	if size == 0 {
		if !n.owned {
			n.data = nil
		}
		n.loaded, n.owned = true, true
	} else if err := t.own(n); err != nil {
		return err
	}
	if size <= int64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	t.bytes += size - n.size
	n.size = size
	t.touched(n)
	return nil
}

// Mkdir implements FS.
func (t *Tree) Mkdir(name string, perm fs.FileMode) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	parent, base, err := t.parentOf("mkdir", name)
	if err != nil {
		return err
	}
	if _, ok := t.kids(parent)[base]; ok {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
	}
	if err := t.admit(0, 1); err != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: err}
	}
	now := t.now()
	parent.children[base] = &node{dir: true, mode: perm.Perm(), modTime: now, children: map[string]*node{}}
	parent.modTime = now
	t.entries++
	t.changed = true
	return nil
}

// Remove implements FS.
func (t *Tree) Remove(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	parent, base, err := t.parentOf("remove", name)
	if err != nil {
		return err
	}
	n, ok := t.kids(parent)[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(t.kids(n)) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: ErrNotEmpty}
	}
	delete(parent.children, base)
	parent.modTime = t.now()
	t.bytes -= n.size
	t.entries--
	t.changed = true
	return nil
}

// Rename implements FS.
func (t *Tree) Rename(oldname, newname string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	opar, obase, err := t.parentOf("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := t.kids(opar)[obase]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	npar, nbase, err := t.parentOf("rename", newname)
	if err != nil {
		return err
	}
	if oldname == newname {
		return nil
	}
	if n.dir && strings.HasPrefix(newname, oldname+"/") {
		return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrInvalid}
	}
	if old, ok := t.kids(npar)[nbase]; ok {
		switch {
		case old.dir && !n.dir:
			return &fs.PathError{Op: "rename", Path: newname, Err: ErrIsDir}
		case !old.dir && n.dir:
			return &fs.PathError{Op: "rename", Path: newname, Err: ErrNotDir}
		case old.dir && len(t.kids(old)) > 0:
			return &fs.PathError{Op: "rename", Path: newname, Err: ErrNotEmpty}
		}
		t.bytes -= old.size
		t.entries--
	}
	delete(opar.children, obase)
	npar.children[nbase] = n
	now := t.now()
	opar.modTime, npar.modTime = now, now
	t.changed = true
	return nil
}

// Chmod implements FS.
func (t *Tree) Chmod(name string, mode fs.FileMode) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.find("chmod", name)
	if err != nil {
		return err
	}
	n.mode = mode.Perm()
	t.changed = true
	return nil
}

// Chtimes implements FS.
func (t *Tree) Chtimes(name string, mtime time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.find("chtimes", name)
	if err != nil {
		return err
	}
	n.modTime = mtime
	t.changed = true
	return nil
}

// Changed reports whether anything was changed since New (a cheap test
// before Changes).
func (t *Tree) Changed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Changes lists what differs from the version New was given, sorted by
// path: entries added or changed (with the content of files whose bytes
// are new) and paths removed. A path whose entry is exactly the
// version's is not listed.
func (t *Tree) Changes() []Change {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.changed {
		return nil
	}
	var out []Change
	seen := map[string]bool{}
	// intact are directories never looked into, at their own path: all
	// they hold is the version's.
	intact := map[string]bool{}
	var walk func(dir string, n *node)
	walk = func(dir string, n *node) {
		for name, c := range n.children {
			p := name
			if dir != "." {
				p = dir + "/" + name
			}
			seen[p] = true
			e := Entry{Path: p, Dir: c.dir, Mode: c.mode, ModTime: c.modTime}
			var data []byte
			if !c.dir {
				if c.dirty {
					sum := sha256.Sum256(c.data)
					c.hash, c.dirty = hex.EncodeToString(sum[:]), false
				}
				e.Hash, e.Size = c.hash, c.size
				if c.loaded {
					data = c.data
				}
			}
			o, had := t.ix.Entry(p)
			if !had || o.Dir != e.Dir || o.Mode != e.Mode || o.Hash != e.Hash || o.Size != e.Size || !o.ModTime.Equal(e.ModTime) {
				ch := Change{Entry: e}
				if !c.dir && (!had || o.Hash != e.Hash) {
					ch.Data = data
				}
				out = append(out, ch)
			}
			switch {
			case !c.dir:
			case c.lazy && c.src == p:
				intact[p] = true
			default:
				walk(p, c)
			}
		}
	}
	t.kids(t.root)
	walk(".", t.root)
	for _, o := range t.ix.entries {
		if seen[o.Path] || underIntact(o.Path, intact) {
			continue
		}
		out = append(out, Change{Entry: Entry{Path: o.Path, Dir: o.Dir}, Removed: true})
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// underIntact reports whether p is inside one of the intact directories.
func underIntact(p string, intact map[string]bool) bool {
	if len(intact) == 0 {
		return false
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if intact[d] {
			return true
		}
	}
	return false
}

func (n *node) info(name string) fs.FileInfo {
	mode := n.mode
	if n.dir {
		mode |= fs.ModeDir
	}
	return fileInfo{name: name, size: n.size, mode: mode, modTime: n.modTime}
}

type fileInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi fileInfo) ModTime() time.Time { return fi.modTime }
func (fi fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi fileInfo) Sys() any           { return nil }

// handle is an open file of a Tree.
type handle struct {
	t                   *Tree
	n                   *node
	name                string
	pos                 int64
	read, write, append bool
	closed              bool
}

func (h *handle) check(op string, allowed bool) error {
	switch {
	case h.closed:
		return &fs.PathError{Op: op, Path: h.name, Err: fs.ErrClosed}
	case h.n.dir:
		return &fs.PathError{Op: op, Path: h.name, Err: ErrIsDir}
	case !allowed:
		return &fs.PathError{Op: op, Path: h.name, Err: fs.ErrPermission}
	}
	return nil
}

func (h *handle) Read(p []byte) (int, error) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	if err := h.check("read", h.read); err != nil {
		return 0, err
	}
	if err := h.t.load(h.n); err != nil {
		return 0, &fs.PathError{Op: "read", Path: h.name, Err: err}
	}
	if h.pos >= int64(len(h.n.data)) {
		return 0, io.EOF
	}
	k := copy(p, h.n.data[h.pos:])
	h.pos += int64(k)
	return k, nil
}

func (h *handle) Write(p []byte) (int, error) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	if err := h.check("write", h.write); err != nil {
		return 0, err
	}
	n := h.n
	if h.append {
		h.pos = n.size
	}
	end := h.pos + int64(len(p))
	if end > MaxFileSize {
		return 0, &fs.PathError{Op: "write", Path: h.name, Err: ErrFileTooLarge}
	}
	if end > n.size {
		if err := h.t.admit(end-n.size, 0); err != nil {
			return 0, &fs.PathError{Op: "write", Path: h.name, Err: err}
		}
	}
	if err := h.t.own(n); err != nil {
		return 0, &fs.PathError{Op: "write", Path: h.name, Err: err}
	}
	if end > int64(len(n.data)) {
		n.data = append(n.data, make([]byte, end-int64(len(n.data)))...)
		h.t.bytes += end - n.size
		n.size = end
	}
	copy(n.data[h.pos:], p)
	h.pos = end
	h.t.touched(n)
	return len(p), nil
}

func (h *handle) Seek(offset int64, whence int) (int64, error) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	if err := h.check("seek", true); err != nil {
		return 0, err
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = h.pos
	case io.SeekEnd:
		base = h.n.size
	default:
		return 0, &fs.PathError{Op: "seek", Path: h.name, Err: fs.ErrInvalid}
	}
	if base+offset < 0 {
		return 0, &fs.PathError{Op: "seek", Path: h.name, Err: fs.ErrInvalid}
	}
	h.pos = base + offset
	return h.pos, nil
}

func (h *handle) Truncate(size int64) error {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	if err := h.check("truncate", h.write); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: h.name, Err: fs.ErrInvalid}
	}
	if size > MaxFileSize {
		return &fs.PathError{Op: "truncate", Path: h.name, Err: ErrFileTooLarge}
	}
	if size > h.n.size {
		if err := h.t.admit(size-h.n.size, 0); err != nil {
			return &fs.PathError{Op: "truncate", Path: h.name, Err: err}
		}
	}
	if err := h.t.truncate(h.n, size); err != nil {
		return &fs.PathError{Op: "truncate", Path: h.name, Err: err}
	}
	return nil
}

func (h *handle) Stat() (fs.FileInfo, error) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	if h.closed {
		return nil, &fs.PathError{Op: "stat", Path: h.name, Err: fs.ErrClosed}
	}
	return h.n.info(path.Base(h.name)), nil
}

func (h *handle) Close() error {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	if h.closed {
		return &fs.PathError{Op: "close", Path: h.name, Err: fs.ErrClosed}
	}
	h.closed = true
	return nil
}
