package workspace

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/tree"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// The container executor runs a command in a sandbox that holds a copy of
// the version's files at /workspace: the copy goes in as a tar
// (WriteTar), the command runs with exec, and the sandbox's /workspace
// comes back as a tar that is compared with the version (ChangesFromTar),
// so its changes land like any executor's. The sandbox's side (attach,
// sync, exec, detach when idle) is the controller's, which owns
// sandboxes; this file is what needs no sandbox.

// ContainerRun is one command for the container executor.
type ContainerRun struct {
	Workspace Record
	// Version and Entries are what the command sees.
	Version int64
	Entries []vfs.Entry
	Script  string
	Stdin   []byte
	Env     map[string]string
	Cwd     string
	Timeout time.Duration
}

// ContainerResult is what the container executor did.
type ContainerResult struct {
	ExitCode       int
	Stdout, Stderr []byte
	// Stopped is why the command was stopped ("timeout"); its changes
	// are then not kept.
	Stopped string
	Changes []vfs.Change
	// Landed is told the version the changes made (the one the command
	// saw when it changed nothing), or -1 when they did not land, so
	// the executor knows what its copy now holds.
	Landed func(version int64)
}

// ContainerFunc runs a command in a container (the controller's).
type ContainerFunc func(ctx context.Context, run ContainerRun) (*ContainerResult, error)

// WriteTar writes a version's files as a tar, names relative to the
// workspace's root, directories before what they hold.
func (s *Store) WriteTar(w io.Writer, entries []vfs.Entry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries { // sorted by path: parents first
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode.Perm()), ModTime: e.ModTime, Format: tar.FormatPAX}
		if e.Dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		b, err := s.Content(e.Hash)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(b))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// CopyEntry is one path of a container's copy of the workspace as the
// executor knows it: the entry, and for a file read back from the copy
// its inode and change time there (zero when not known).
type CopyEntry struct {
	vfs.Entry
	Ino   uint64
	Ctime int64
}

// Copy is what a container's copy of the workspace holds, by path.
type Copy map[string]CopyEntry

// CopyOf is a copy that holds entries, inodes and change times not known.
func CopyOf(entries []vfs.Entry) Copy {
	c := make(Copy, len(entries))
	for _, e := range entries {
		c[e.Path] = CopyEntry{Entry: e}
	}
	return c
}

// ErrStaleCopy is a read-back that marked a file unchanged (see
// tree.KindUnchanged) which the copy as known does not vouch for: another
// inode, another change time, or a path it did not hold. The caller reads
// the copy again whole.
var ErrStaleCopy = errors.New("the container's copy is not the one last read back")

// SyncPlan is what brings a copy that holds held to target: the paths to
// remove first (files that went, and whatever changed kind; none under
// another), then the entries to write (new or changed, parents first), and
// what the copy then holds (inodes and change times kept for what stays).
func SyncPlan(held Copy, target []vfs.Entry) (remove []string, write []vfs.Entry, next Copy) {
	next = make(Copy, len(target))
	want := make(map[string]bool, len(target))
	for _, e := range target {
		want[e.Path] = true
		h, ok := held[e.Path]
		if ok && h.Dir == e.Dir && h.Mode == e.Mode && h.Hash == e.Hash {
			next[e.Path] = CopyEntry{Entry: e, Ino: h.Ino, Ctime: h.Ctime}
			continue
		}
		next[e.Path] = CopyEntry{Entry: e}
		write = append(write, e)
	}
	gone := map[string]bool{}
	for p, h := range held {
		if t, ok := next[p]; !want[p] || (ok && t.Dir != h.Dir) {
			gone[p] = true
		}
	}
	for p := range gone {
		if !underAny(p, gone) {
			remove = append(remove, p)
		}
	}
	sort.Strings(remove)
	return remove, write, next
}

// underAny says whether a directory above p is in set.
func underAny(p string, set map[string]bool) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if set[d] {
			return true
		}
	}
	return false
}

// ChangesFromTree reads a container's copy of the workspace as a tree
// stream (package tree; from a sandbox: untrusted) and lists how it
// differs from the version the command saw, which the copy held when it
// began (held). A file whose content, mode and kind are the version's
// keeps the version's entry. A file the stream marks unchanged must be one
// held holds with the same inode and change time, whose content is then
// held's; else the result is ErrStaleCopy. What a workspace cannot hold
// (symlinks, devices, other kinds) is skipped and named in skipped. seen
// is what the copy now holds. The stream is bounded by lim: past it, the
// result is a quota error and nothing lands.
func ChangesFromTree(r io.Reader, version []vfs.Entry, held Copy, lim vfs.Limits) (changes []vfs.Change, skipped []string, seen Copy, err error) {
	tr := tree.NewReader(r)
	return changesFrom(func() (tree.Record, io.Reader, error) {
		rec, err := tr.Next()
		return rec, tr, err
	}, version, held, lim)
}

// ChangesFromTar is ChangesFromTree for a tar of the copy (an agent from
// before the tree route): every file with its content, no inode known.
func ChangesFromTar(r io.Reader, version []vfs.Entry, lim vfs.Limits) (changes []vfs.Change, skipped []string, seen Copy, err error) {
	tr := tar.NewReader(r)
	return changesFrom(func() (tree.Record, io.Reader, error) {
		hdr, err := tr.Next()
		if err != nil {
			return tree.Record{}, nil, err
		}
		rec := tree.Record{Path: hdr.Name, Mode: fs.FileMode(hdr.Mode).Perm(), Mtime: hdr.ModTime.UnixNano(), Size: hdr.Size, Kind: tree.KindOther}
		switch hdr.Typeflag {
		case tar.TypeDir:
			rec.Kind = tree.KindDir
		case tar.TypeReg:
			rec.Kind = tree.KindFile
		}
		return rec, tr, nil
	}, version, nil, lim)
}

func changesFrom(next func() (tree.Record, io.Reader, error), version []vfs.Entry, held Copy, lim vfs.Limits) (changes []vfs.Change, skipped []string, seen Copy, err error) {
	old := make(map[string]vfs.Entry, len(version))
	for _, e := range version {
		old[e.Path] = e
	}
	seen = make(Copy, len(version))
	dirs := map[string]bool{".": true}
	var bytes, entries int64
	for {
		rec, content, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read the container's copy of the workspace: %w", err)
		}
		name := strings.TrimSuffix(path.Clean(strings.TrimPrefix(rec.Path, "./")), "/")
		if name == "." {
			continue
		}
		if _, dup := seen[name]; !fs.ValidPath(name) || dup {
			return nil, nil, nil, fmt.Errorf("the container's copy of the workspace has a bad or repeated path %q: %w", truncate(rec.Path, 128), errdefs.ErrInvalidArgument)
		}
		if entries++; lim.MaxEntries > 0 && entries > lim.MaxEntries {
			return nil, nil, nil, fmt.Errorf("the container's copy of the workspace holds more than its quota of %d files and directories; nothing was kept: %w", lim.MaxEntries, errdefs.ErrResourceExhausted)
		}
		if !dirs[path.Dir(name)] || rec.Kind == tree.KindOther {
			skipped = append(skipped, name)
			continue
		}
		e := vfs.Entry{Path: name, Mode: rec.Mode, ModTime: time.Unix(0, rec.Mtime).UTC()}
		var data []byte
		switch rec.Kind {
		case tree.KindDir:
			e.Dir = true
			dirs[name] = true
		case tree.KindUnchanged:
			h, ok := held[name]
			if !ok || h.Dir || h.Ino == 0 || h.Ino != rec.Ino || h.Ctime != rec.Ctime {
				return nil, nil, nil, ErrStaleCopy
			}
			e.Hash, e.Size = h.Hash, h.Size
		case tree.KindFile:
			if rec.Size > vfs.MaxFileSize {
				return nil, nil, nil, fmt.Errorf("%s in the container is %d bytes, past the %d a workspace file may hold; nothing was kept: %w", name, rec.Size, int64(vfs.MaxFileSize), errdefs.ErrResourceExhausted)
			}
			if lim.MaxBytes > 0 && bytes+rec.Size > lim.MaxBytes {
				return nil, nil, nil, quotaPast(lim)
			}
			data, err = io.ReadAll(io.LimitReader(content, rec.Size))
			if err != nil {
				return nil, nil, nil, fmt.Errorf("read %s from the container: %w", name, err)
			}
			sum := sha256.Sum256(data)
			e.Hash, e.Size = hex.EncodeToString(sum[:]), int64(len(data))
		default:
			return nil, nil, nil, fmt.Errorf("the container's copy of the workspace has an entry of kind %q: %w", rec.Kind, errdefs.ErrInvalidArgument)
		}
		if bytes += e.Size; lim.MaxBytes > 0 && bytes > lim.MaxBytes {
			return nil, nil, nil, quotaPast(lim)
		}
		seen[name] = CopyEntry{Entry: e, Ino: rec.Ino, Ctime: rec.Ctime}
		o, had := old[name]
		switch {
		case had && o.Dir == e.Dir && o.Hash == e.Hash && o.Mode == e.Mode:
			continue // unchanged
		case had && !e.Dir && o.Hash == e.Hash:
			data = nil // the version holds this content already
		case data == nil && !e.Dir:
			// Marked unchanged, yet not the version's content: the copy
			// did not hold the version when the command began.
			return nil, nil, nil, ErrStaleCopy
		}
		changes = append(changes, vfs.Change{Entry: e, Data: data})
	}
	for _, o := range version {
		if _, ok := seen[o.Path]; !ok {
			changes = append(changes, vfs.Change{Entry: vfs.Entry{Path: o.Path, Dir: o.Dir}, Removed: true})
		}
	}
	return changes, skipped, seen, nil
}

func quotaPast(lim vfs.Limits) error {
	return fmt.Errorf("the container's copy of the workspace holds more than its quota of %d bytes; nothing was kept: %w", lim.MaxBytes, errdefs.ErrResourceExhausted)
}
