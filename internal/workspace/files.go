package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// ExecutorFiles is the executor history names for a file written through
// the file routes rather than by a command.
const ExecutorFiles = "files"

// CheckFilePath validates a path given to the file routes: relative to
// the workspace's root, as a command names it from there.
func CheckFilePath(p string) error {
	if p == "" || p == "." || !fs.ValidPath(p) {
		return errdefs.Invalid("path %q: give a file's path relative to the workspace's root, like src/app.py (no leading '/', no '.' or '..' parts)", truncate(p, 256))
	}
	return nil
}

// File is one file of a version, as ReadFile gives it.
type File struct {
	Entry   vfs.Entry
	Data    []byte
	Version int64
}

// ReadFile reads one file of the workspace's version (r.Head when
// version < 0).
func (s *Store) ReadFile(ctx context.Context, r Record, version int64, p string) (File, error) {
	if err := CheckFilePath(p); err != nil {
		return File{}, err
	}
	var e vfs.Entry
	var ok bool
	if version < 0 || version == r.Head {
		v, ix, err := s.headOf(ctx, r)
		if err != nil {
			return File{}, err
		}
		version = v
		e, ok = ix.Entry(p)
	} else {
		if err := checkVersion(r, version); err != nil {
			return File{}, err
		}
		entries, err := s.entriesAt(ctx, s.r, r.ID, version)
		if err != nil {
			return File{}, err
		}
		for _, x := range entries {
			if x.Path == p {
				e, ok = x, true
				break
			}
		}
	}
	switch {
	case !ok:
		return File{}, fmt.Errorf("%s has no %s in version %d: %w", r.Name, p, version, errdefs.ErrNotFound)
	case e.Dir:
		return File{}, errdefs.Invalid("%s is a directory of %s: list it with a command (ls %s)", p, r.Name, p)
	}
	data, err := s.Content(e.Hash)
	if err != nil {
		return File{}, err
	}
	return File{Entry: e, Data: data, Version: version}, nil
}

// FileWrite is one file written through the file routes.
type FileWrite struct {
	Workspace Record
	Caller    string
	Path      string
	// Data is the file's whole new content.
	Data io.Reader
	// Mode sets the file's permission bits; 0 keeps an existing file's
	// and gives a new one 0644.
	Mode fs.FileMode
	// Base is the version the writer saw (a change to the file made after
	// it is a conflict, and nothing lands); < 0: the current version.
	Base int64
}

// WriteFile writes one file as a new version, its missing parent
// directories made (0755), as a command writing it would.
func (s *Store) WriteFile(ctx context.Context, w FileWrite) (*api.WorkspaceRunResult, error) {
	r := w.Workspace
	if err := CheckFilePath(w.Path); err != nil {
		return nil, err
	}
	if w.Mode&^fs.ModePerm != 0 {
		return nil, errdefs.Invalid("mode %o: give permission bits only, like 0644", w.Mode)
	}
	base, index, err := s.headOf(ctx, r)
	if err != nil {
		return nil, err
	}
	if w.Base >= 0 && w.Base != base {
		if w.Base > base {
			return nil, errdefs.Invalid("base %d: %s is at version %d", w.Base, r.Name, base)
		}
		if err := checkVersion(r, w.Base); err != nil {
			return nil, err
		}
		entries, err := s.entriesAt(ctx, s.r, r.ID, w.Base)
		if err != nil {
			return nil, err
		}
		if index, err = vfs.NewIndex(entries); err != nil {
			return nil, err
		}
		base = w.Base
	}
	start := time.Now()
	tree := vfs.FromIndex(index, s.Content, vfs.Limits{MaxBytes: r.MaxBytes, MaxEntries: r.MaxFiles})
	if err := writeTreeFile(tree, w.Path, w.Data, w.Mode); err != nil {
		return nil, fileError(r, w.Path, err)
	}
	out := &api.WorkspaceRunResult{Executor: ExecutorFiles, BaseVersion: base, Version: base}
	c := Commit{Workspace: r.ID, Base: base, Caller: w.Caller, Executor: ExecutorFiles, Command: "write " + w.Path}
	c.Changes = tree.Changes()
	if old, ok := index.Entry(w.Path); base == r.Head && (len(c.Changes) == 0 ||
		ok && len(c.Changes) == 1 && c.Changes[0].Path == w.Path && c.Changes[0].Hash == old.Hash && c.Changes[0].Mode == old.Mode) {
		// The current content and mode again: a PUT that repeats itself
		// makes no version (only the file's time would differ). On an
		// older base it goes on to Apply, which says whether another
		// version changed the file since.
		c.Changes = nil
	}
	out.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	if err := s.finish(ctx, c, out); err != nil {
		return nil, err
	}
	return out, nil
}

// writeTreeFile makes p's parents and writes data to p in tree.
func writeTreeFile(tree *vfs.Tree, p string, data io.Reader, mode fs.FileMode) error {
	dir := path.Dir(p)
	if dir != "." {
		parts := strings.Split(dir, "/")
		for i := range parts {
			d := strings.Join(parts[:i+1], "/")
			err := tree.Mkdir(d, 0o755)
			if err == nil || errors.Is(err, fs.ErrExist) {
				continue
			}
			return err
		}
	}
	_, statErr := tree.Stat(p)
	existed := statErr == nil
	perm := mode
	if perm == 0 {
		perm = 0o644
	}
	f, err := tree.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if existed && mode != 0 {
		return tree.Chmod(p, mode)
	}
	return nil
}

// fileError turns a vfs error of a file write into the API's kinds; any
// other error (the request body's) is returned as it is.
func fileError(r Record, p string, err error) error {
	switch {
	case errors.Is(err, vfs.ErrQuota):
		return fmt.Errorf("writing %s would take %s past its quota (%d bytes, %d files); nothing was kept: %w", p, r.Name, r.MaxBytes, r.MaxFiles, errdefs.ErrResourceExhausted)
	case errors.Is(err, vfs.ErrFileTooLarge):
		return fmt.Errorf("%s would be past the %d bytes a workspace file may hold; nothing was kept: %w", p, int64(vfs.MaxFileSize), errdefs.ErrResourceExhausted)
	case errors.Is(err, vfs.ErrIsDir):
		return errdefs.Invalid("%s is a directory of %s: give a file's path", p, r.Name)
	case errors.Is(err, vfs.ErrNotDir):
		return errdefs.Invalid("%s: a part of its path is a file of %s, not a directory", p, r.Name)
	}
	return err
}
