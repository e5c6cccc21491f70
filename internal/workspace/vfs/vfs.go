// Package vfs is a workspace's files as one command sees them: the
// version the command started from, read lazily from the workspace store,
// with the command's own changes kept in memory on top. When the command
// ends, Changes lists what it did, and the store lands them in one
// transaction (or not at all).
//
// Paths are io/fs paths: slash-separated, relative to the workspace's root,
// cleaned, no leading slash, "." for the root itself (fs.ValidPath). A
// workspace holds regular files and directories only: no symlinks, devices
// or other kinds, so nothing in it can point outside it.
//
// Errors are *fs.PathError wrapping fs.ErrNotExist, fs.ErrExist,
// fs.ErrInvalid, ErrNotDir, ErrIsDir, ErrNotEmpty, or ErrQuota (the
// workspace's bytes or file count would exceed its quota).
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"syscall"
	"time"
)

var (
	// ErrNotDir: a path's parent (or the path itself, where a directory
	// is needed) is a file.
	ErrNotDir = syscall.ENOTDIR
	// ErrIsDir: a file operation was asked of a directory.
	ErrIsDir = syscall.EISDIR
	// ErrNotEmpty: a directory to remove still has entries.
	ErrNotEmpty = syscall.ENOTEMPTY
	// ErrQuota: the change would take the workspace past its quota of
	// bytes or files.
	ErrQuota = syscall.EDQUOT
	// ErrFileTooLarge: a file would grow past MaxFileSize.
	ErrFileTooLarge = syscall.EFBIG
)

// MaxFileSize bounds one file of a workspace: a content is one SQLite
// value (whose limit is about 1 GB) and is read whole into memory.
const MaxFileSize = 512 << 20

// FS is what an executor may do to a workspace. Implementations are safe
// for use by one command's goroutines at once.
type FS interface {
	// Stat describes name (a file or directory).
	Stat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory's entries sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Open opens a file for reading.
	Open(name string) (io.ReadCloser, error)
	// ReadFile returns a file's whole content, which the caller must not
	// change (it may be shared).
	ReadFile(name string) ([]byte, error)
	// OpenFile opens or creates a file with os.O_* flags (O_RDONLY,
	// O_WRONLY, O_RDWR, O_APPEND, O_CREATE, O_EXCL, O_TRUNC). Its parent
	// must exist. A written file's new content is part of the command's
	// changes once it is closed (and is visible to other opens as it is
	// written).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Mkdir makes one directory; its parent must exist.
	Mkdir(name string, perm fs.FileMode) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename moves a file or a directory (with everything under it).
	// A file replaces a file; a directory may replace only an empty one.
	Rename(oldname, newname string) error
	// Chmod sets the permission bits (fs.ModePerm) of a file or directory.
	Chmod(name string, mode fs.FileMode) error
	// Chtimes sets the modification time of a file or directory (touch).
	Chtimes(name string, mtime time.Time) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.Writer
	io.Seeker
	io.Closer
	Stat() (fs.FileInfo, error)
	Truncate(size int64) error
}

// IsQuota reports whether err says a quota was reached.
func IsQuota(err error) bool { return errors.Is(err, ErrQuota) }

// MkdirAll makes name and its missing parents in fsys.
func MkdirAll(fsys FS, name string) error {
	if name == "." {
		return nil
	}
	fi, err := fsys.Stat(name)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: name, Err: ErrNotDir}
		}
		return nil
	}
	if err := MkdirAll(fsys, path.Dir(name)); err != nil {
		return err
	}
	if err := fsys.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// RemoveAll removes name and everything under it from fsys.
func RemoveAll(fsys FS, name string) error {
	ents, err := fsys.ReadDir(name)
	if err == nil {
		for _, e := range ents {
			if err := RemoveAll(fsys, path.Join(name, e.Name())); err != nil {
				return err
			}
		}
	}
	return fsys.Remove(name)
}
