// Package snapshot keeps filesystem snapshots of sandboxes: content-addressed,
// read-only layer directories in overlayfs format (whiteouts are 0/0
// character devices, opaque directories carry trusted.overlay.opaque=y),
// their canonical tar encoding (which is what a layer's digest is taken
// over), a safe extractor for tar streams from outside, and the one-file
// export format.
package snapshot

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// maxDepth bounds directory nesting, in the writer and the extractor: each
// level holds one open descriptor.
const maxDepth = 256

// xattrPrefix is how PAX headers carry extended attributes.
const xattrPrefix = "SCHILY.xattr."

// opaqueXattr marks an overlay directory that hides the lower layers' one.
const opaqueXattr = "trusted.overlay.opaque"

// userOpaqueXattr is the same marker as overlayfs spells it under its
// userxattr option. A daemon that may not set trusted.* attributes (one
// without CAP_SYS_ADMIN, as in a Kubernetes pod) keeps the marker of the
// layers it writes under this name, and a directory's marker under
// either name reads back as the canonical opaqueXattr
// (canonicalOpaque), so a layer's tar and digest do not depend on which
// daemon wrote it.
const userOpaqueXattr = "user.overlay.opaque"

// canonicalOpaque turns a directory's userOpaqueXattr record of "y" in
// recs (PAX records) into the opaqueXattr one.
func canonicalOpaque(recs map[string]string) map[string]string {
	if recs[xattrPrefix+userOpaqueXattr] != "y" {
		return recs
	}
	delete(recs, xattrPrefix+userOpaqueXattr)
	recs[xattrPrefix+opaqueXattr] = "y"
	return recs
}

// setOpaque marks the open directory fd opaque: with opaqueXattr, or,
// where this process may not set trusted.* attributes, userOpaqueXattr.
func setOpaque(fd int) error {
	err := unix.Fsetxattr(fd, opaqueXattr, []byte("y"), 0)
	if errors.Is(err, unix.EPERM) {
		err = unix.Fsetxattr(fd, userOpaqueXattr, []byte("y"), 0)
	}
	return err
}

// keptXattr says which extended attributes a snapshot keeps. Others (for
// example security.selinux, or overlay's private redirect and metacopy
// attributes) describe the host, not the sandbox's files.
func keptXattr(name string) bool {
	return name == opaqueXattr || name == "security.capability" || strings.HasPrefix(name, "user.")
}

// TreeOptions tune WriteTree.
type TreeOptions struct {
	// SkipTop names entries of the top directory that are not part of the
	// tree (the runtime's own mount points).
	SkipTop []string
	// Warn reports entries left out (sockets, FIFOs, device nodes).
	Warn func(msg string, args ...any)
}

// WriteTree writes the overlay-format directory dir as a canonical tar
// stream: entries sorted by name, directories before their contents, PAX
// headers with nanosecond times, no user or group names, hard links written
// as separate files. The same tree always gives the same bytes, so a digest
// of the stream names the tree. dir may be controlled by a sandbox: the
// walk goes descriptor by descriptor with O_NOFOLLOW and never follows a
// symlink.
func WriteTree(ctx context.Context, dir string, w io.Writer, opts TreeOptions) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("snapshot: open %s: %w", path.Base(dir), err)
	}
	defer unix.Close(fd)
	return (&treeWriter{ctx: ctx, tw: tar.NewWriter(w), opts: opts}).run(fd, dir)
}

// treeWriter walks a tree for WriteTree and for the store's own passes
// over its layers: with seal set it also hashes every entry's metadata
// (see sealEntry); with metaOnly it writes no tar stream and reads no file
// content; with dd set it links the layer's files into the object pool.
type treeWriter struct {
	ctx      context.Context
	tw       *tar.Writer
	opts     TreeOptions
	seal     hash.Hash
	metaOnly bool
	dd       *deduper
}

func (t *treeWriter) run(fd int, dir string) error {
	if t.opts.Warn == nil {
		t.opts.Warn = func(string, ...any) {}
	}
	var root unix.Stat_t
	if t.dd != nil {
		if err := unix.Fstat(fd, &root); err != nil {
			return fmt.Errorf("snapshot: stat %s: %w", path.Base(dir), err)
		}
		t.dd.added += inodeBytes(&root)
	}
	changed, err := t.dir(fd, "", 0)
	if err != nil {
		return err
	}
	if changed {
		if err := keepTimes(unix.AT_FDCWD, dir, &root); err != nil {
			return err
		}
	}
	if t.metaOnly {
		return nil
	}
	if err := t.tw.Close(); err != nil {
		return fmt.Errorf("snapshot: write tar: %w", err)
	}
	return nil
}

// header writes one entry's header to the stream and the seal.
func (t *treeWriter) header(hdr *tar.Header) error {
	if t.seal != nil {
		sealEntry(t.seal, hdr)
	}
	if t.metaOnly {
		return nil
	}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("snapshot: write tar: %w", err)
	}
	return nil
}

// dir walks the directory fd. It reports whether the deduper replaced an
// entry of it, which changed its modification time.
func (t *treeWriter) dir(fd int, name string, depth int) (changed bool, err error) {
	if depth > maxDepth {
		return false, fmt.Errorf("snapshot: directories nest deeper than %d: %w", maxDepth, errdefs.ErrFailedPrecondition)
	}
	if err := t.ctx.Err(); err != nil {
		return false, err
	}
	names, err := dirNames(fd)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if name == "" && contains(t.opts.SkipTop, n) {
			continue
		}
		c, err := t.entry(fd, name, n, depth)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func dirNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("snapshot: read directory: %w", err)
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("snapshot: read directory: %w", err)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("snapshot: read directory: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// entry writes one entry. It reports whether the deduper replaced it,
// which changed the modification time of the directory holding it.
func (t *treeWriter) entry(dirfd int, parent, n string, depth int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("snapshot: stat: %w", err)
	}
	name := path.Join(parent, n)
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()),
		Format:  tar.FormatPAX,
	}
	if t.dd != nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		t.dd.added += inodeBytes(&st)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		cfd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, fmt.Errorf("snapshot: open directory %s: %w", name, err)
		}
		defer unix.Close(cfd)
		hdr.Typeflag = tar.TypeDir
		hdr.Name = name + "/"
		if hdr.PAXRecords, err = xattrs(cfd); err != nil {
			return false, err
		}
		hdr.PAXRecords = canonicalOpaque(hdr.PAXRecords)
		if err := t.header(hdr); err != nil {
			return false, err
		}
		changed, err := t.dir(cfd, name, depth+1)
		if err != nil {
			return false, err
		}
		if changed {
			// The directory's time is part of the layer: put it back.
			if err := keepTimes(dirfd, n, &st); err != nil {
				return false, err
			}
		}
		return false, nil
	case unix.S_IFLNK:
		target, err := readlinkat(dirfd, n)
		if err != nil {
			return false, fmt.Errorf("snapshot: read symlink %s: %w", name, err)
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
		return false, t.header(hdr)
	case unix.S_IFCHR:
		if unix.Major(st.Rdev) != 0 || unix.Minor(st.Rdev) != 0 {
			t.opts.Warn("leaving a device node out of the snapshot", "path", name)
			return false, nil
		}
		hdr.Typeflag = tar.TypeChar
		return false, t.header(hdr)
	case unix.S_IFREG:
		return t.regular(dirfd, n, hdr, &st)
	default:
		t.opts.Warn("leaving a socket, FIFO or device out of the snapshot", "path", name)
		return false, nil
	}
}

func (t *treeWriter) regular(dirfd int, n string, hdr *tar.Header, pre *unix.Stat_t) (bool, error) {
	if t.metaOnly && procFDs() {
		return false, t.regularMeta(dirfd, n, hdr, pre)
	}
	// O_NONBLOCK: a FIFO swapped in after the stat must not block the open.
	fd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return false, fmt.Errorf("snapshot: open %s: %w", hdr.Name, err)
	}
	f := os.NewFile(uintptr(fd), n)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("snapshot: stat %s: %w", hdr.Name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != pre.Ino || st.Dev != pre.Dev {
		return false, fmt.Errorf("snapshot: %s changed while it was read: %w", hdr.Name, errdefs.ErrConflict)
	}
	if hdr.PAXRecords, err = xattrs(fd); err != nil {
		return false, err
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Size = st.Size
	if err := t.header(hdr); err != nil {
		return false, err
	}
	if t.metaOnly {
		return false, nil
	}
	// A file the pool may take is hashed on its own as well, by a second
	// reader of the same descriptor, so the two digests use two cores.
	var sum chan contentSum
	if t.dd.wants(&st) {
		sum = make(chan contentSum, 1)
		go func() {
			h := sha256.New()
			n, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size))
			sum <- contentSum{h.Sum(nil), n, err}
		}()
	}
	n64, err := io.Copy(t.tw, io.LimitReader(f, st.Size))
	var cs contentSum
	if sum != nil {
		cs = <-sum // before f is closed
		if err == nil && cs.err != nil {
			err = cs.err
		}
		if cs.n != st.Size {
			n64 = cs.n
		}
	}
	if err != nil {
		return false, fmt.Errorf("snapshot: copy %s: %w", hdr.Name, err)
	}
	if n64 != st.Size {
		// The tree must not change while it is written (the sandbox is
		// frozen or stopped); a short file means it did.
		return false, fmt.Errorf("snapshot: %s shrank while it was read: %w", hdr.Name, errdefs.ErrConflict)
	}
	if t.dd == nil {
		return false, nil
	}
	return t.dd.file(dirfd, n, hdr, &st, cs.sum)
}

type contentSum struct {
	sum []byte
	n   int64
	err error
}

// procFDs reports whether /proc/self/fd can name files by descriptor.
var procFDs = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
})

// regularMeta is regular for a walk of a store's own layer that reads no
// content: the stat the walk took, and the extended attributes read by
// path through the directory's descriptor, without opening the file.
func (t *treeWriter) regularMeta(dirfd int, n string, hdr *tar.Header, st *unix.Stat_t) error {
	var err error
	if hdr.PAXRecords, err = xattrsAt(dirfd, n); err != nil {
		return err
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Size = st.Size
	return t.header(hdr)
}

// keepTimes sets the access and modification times of dirfd/n back to
// those in st.
func keepTimes(dirfd int, n string, st *unix.Stat_t) error {
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(dirfd, n, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("snapshot: set directory time: %w", err)
	}
	return nil
}

// xattrs returns the kept extended attributes of the open file fd as PAX
// records, or nil.
func xattrs(fd int) (map[string]string, error) {
	return keptXattrs(
		func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) },
		func(name string, buf []byte) (int, error) { return unix.Fgetxattr(fd, name, buf) })
}

// xattrsAt is xattrs for dirfd/n, which must not be a symlink the caller
// lets a sandbox choose: the path goes through /proc/self/fd, and the
// l-variants read the entry itself.
func xattrsAt(dirfd int, n string) (map[string]string, error) {
	p := "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + n
	return keptXattrs(
		func(buf []byte) (int, error) { return unix.Llistxattr(p, buf) },
		func(name string, buf []byte) (int, error) { return unix.Lgetxattr(p, name, buf) })
}

func keptXattrs(list func([]byte) (int, error), get func(string, []byte) (int, error)) (map[string]string, error) {
	buf := make([]byte, 4096)
	sz, err := list(buf)
	if errors.Is(err, unix.ERANGE) {
		if sz, err = list(nil); err == nil {
			buf = make([]byte, sz)
			sz, err = list(buf)
		}
	}
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: list xattrs: %w", err)
	}
	var recs map[string]string
	for _, name := range strings.Split(string(buf[:sz]), "\x00") {
		if name == "" || !keptXattr(name) {
			continue
		}
		val := make([]byte, 64<<10)
		k, err := get(name, val)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot: read xattr %s: %w", name, err)
		}
		if recs == nil {
			recs = map[string]string{}
		}
		recs[xattrPrefix+name] = string(val[:k])
	}
	return recs, nil
}

func readlinkat(dirfd int, n string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		k, err := unix.Readlinkat(dirfd, n, buf)
		if err != nil {
			return "", err
		}
		if k < size {
			return string(buf[:k]), nil
		}
	}
	return "", errdefs.Invalid("symlink target too long")
}
