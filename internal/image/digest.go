package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// epoch is the fixed mtime written for every entry: timestamps say when a
// tree was built, not what it is, so they stay out of the digest.
var epoch = time.Unix(0, 0).UTC()

// treeSum is what one walk of a rootfs yields.
type treeSum struct {
	Digest string // "sha256:<hex>"
	Size   int64  // bytes of regular file content, hard links counted once
	Files  int64  // entries written
}

// digestTree computes the digest of dir as a canonical tar stream: entries in
// byte-sorted path order, PAX format, mtime fixed, no atime/ctime, no user or
// group names; kept are uid, gid, mode, type, link target, device numbers,
// hard links and extended attributes. Symlinks are recorded, never followed.
// The stream goes into the hasher only.
func digestTree(ctx context.Context, dir string) (treeSum, error) {
	h := sha256.New()
	w := &treeWalker{
		ctx:   ctx,
		tw:    tar.NewWriter(h),
		links: make(map[fileID]string),
		buf:   make([]byte, 1<<20),
	}
	root, err := os.Lstat(dir)
	if err != nil {
		return treeSum{}, fmt.Errorf("image layer: %w", err)
	}
	if !root.IsDir() {
		return treeSum{}, fmt.Errorf("image layer %s is not a directory", dir)
	}
	if err := w.walk(dir, ""); err != nil {
		return treeSum{}, err
	}
	if err := w.tw.Close(); err != nil {
		return treeSum{}, err
	}
	return treeSum{
		Digest: digestPrefix + hex.EncodeToString(h.Sum(nil)),
		Size:   w.size,
		Files:  w.files,
	}, nil
}

type fileID struct{ dev, ino uint64 }

type treeWalker struct {
	ctx   context.Context
	tw    *tar.Writer
	links map[fileID]string // first path seen of each multiply linked file
	buf   []byte
	size  int64
	files int64
	// oci writes overlayfs whiteouts the way OCI layers spell them
	// (.wh.<name> files and .wh..wh..opq markers) instead of as the
	// character devices and xattrs the store keeps.
	oci bool
}

// walk writes the entry for host path p (tar name rel, "" for the root) and,
// for a directory, its children.
func (w *treeWalker) walk(p, rel string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fmt.Errorf("image layer: lstat %s: %w", rel, err)
	}
	name := rel
	if name == "" {
		name = "."
	}
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: epoch,
		Format:  tar.FormatPAX,
	}
	xattrs, err := listXattrs(p)
	if err != nil {
		return fmt.Errorf("image layer: xattrs of %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR && xattrs["SCHILY.xattr."+userOpaqueXattr] == "y" {
		// The marker as a daemon without CAP_SYS_ADMIN keeps it: the
		// same layer, the same tar and digest.
		delete(xattrs, "SCHILY.xattr."+userOpaqueXattr)
		xattrs["SCHILY.xattr."+opaqueXattr] = "y"
	}
	opaque := false
	if w.oci {
		opaque = xattrs["SCHILY.xattr."+opaqueXattr] == "y"
		for k := range xattrs {
			if strings.HasPrefix(k, "SCHILY.xattr.trusted.overlay.") {
				delete(xattrs, k)
			}
		}
	}
	if len(xattrs) > 0 {
		hdr.PAXRecords = xattrs
	}

	var isDir, isReg bool
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		isDir = true
		hdr.Typeflag = tar.TypeDir
		hdr.Name = name + "/"
	case unix.S_IFREG:
		id := fileID{uint64(st.Dev), st.Ino}
		if first, ok := w.links[id]; ok && st.Nlink > 1 {
			hdr.Typeflag = tar.TypeLink
			hdr.Linkname = first
			break
		}
		if st.Nlink > 1 {
			w.links[id] = name
		}
		isReg = true
		hdr.Typeflag = tar.TypeReg
		hdr.Size = st.Size
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("image layer: readlink %s: %w", name, err)
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
	case unix.S_IFCHR, unix.S_IFBLK:
		if w.oci && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			hdr.Typeflag = tar.TypeReg
			hdr.Name = path.Join(path.Dir(name), whiteoutPrefix+path.Base(name))
			hdr.Mode, hdr.PAXRecords = 0, nil
			break
		}
		hdr.Typeflag = tar.TypeChar
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			hdr.Typeflag = tar.TypeBlock
		}
		hdr.Devmajor = int64(unix.Major(uint64(st.Rdev)))
		hdr.Devminor = int64(unix.Minor(uint64(st.Rdev)))
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	default:
		// Sockets cannot live in a tar stream and mean nothing in an
		// image, so they are left out, as tar itself does.
		return nil
	}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("image layer: %s: %w", name, err)
	}
	w.files++
	if isReg {
		if err := w.copyFile(p, name, st); err != nil {
			return err
		}
	}
	if !isDir {
		return nil
	}
	if opaque {
		wh := &tar.Header{Name: path.Join(name, whiteoutOpaque), Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}
		if err := w.tw.WriteHeader(wh); err != nil {
			return fmt.Errorf("image layer: %s: %w", wh.Name, err)
		}
	}
	names, err := readDirNames(p)
	if err != nil {
		return fmt.Errorf("image layer: read dir %s: %w", name, err)
	}
	for _, n := range names {
		childRel := n
		if rel != "" {
			childRel = path.Join(rel, n)
		}
		if err := w.walk(filepath.Join(p, n), childRel); err != nil {
			return err
		}
	}
	return nil
}

// copyFile hashes a regular file's content. O_NOFOLLOW and the fstat check
// make sure that what is read is the file that was stat'ed, not whatever a
// swapped-in symlink points at.
func (w *treeWalker) copyFile(p, name string, st unix.Stat_t) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("image layer: open %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return fmt.Errorf("image layer: fstat %s: %w", name, err)
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino || fst.Size != st.Size {
		return fmt.Errorf("image layer: %s changed while it was read", name)
	}
	n, err := io.CopyBuffer(w.tw, io.LimitReader(f, st.Size), w.buf)
	if err != nil {
		return fmt.Errorf("image layer: read %s: %w", name, err)
	}
	if n != st.Size {
		return fmt.Errorf("image layer: %s shrank while it was read", name)
	}
	w.size += n
	return nil
}

// readDirNames lists a directory in byte order, the one order every walk
// of the same tree agrees on.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// maxXattrSize bounds one listing or value; the kernel's own limit is 64 KiB.
const maxXattrSize = 64 << 10

// listXattrs returns the extended attributes of p (not of a symlink's
// target) as PAX records.
func listXattrs(p string) (map[string]string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if errors.Is(err, unix.ERANGE) {
		buf = make([]byte, maxXattrSize)
		n, err = unix.Llistxattr(p, buf)
	}
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	recs := make(map[string]string)
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		val := make([]byte, 256)
		vn, err := unix.Lgetxattr(p, name, val)
		if errors.Is(err, unix.ERANGE) {
			val = make([]byte, maxXattrSize)
			vn, err = unix.Lgetxattr(p, name, val)
		}
		if errors.Is(err, unix.ENODATA) {
			continue // removed between list and get
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		recs["SCHILY.xattr."+name] = string(val[:vn])
	}
	return recs, nil
}
