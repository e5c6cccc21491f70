package oci

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// maxExportDepth bounds directory nesting: each level holds one open fd.
const maxExportDepth = 256

// ExportLayer writes the sandbox's writable layer as a tar stream with OCI
// whiteouts. The layer is controlled by the sandbox and may change while
// it is read, so the walk goes fd by fd (openat with O_NOFOLLOW), never by
// path, and every file is checked after opening.
func (r *Runtime) ExportLayer(ctx context.Context, id string, w io.Writer) error {
	if err := checkID(id); err != nil {
		return err
	}
	l := r.layout(id)
	if _, err := os.Lstat(l.disk); err != nil {
		if _, derr := os.Lstat(l.dir); derr != nil {
			return notFound(id)
		}
		return fmt.Errorf("sandbox %s has no writable layer: %w", id, errdefs.ErrFailedPrecondition)
	}
	mounted, err := isMountPoint(l.scratch)
	if err != nil {
		return err
	}
	if !mounted {
		// A stopped sandbox: mount its disk just for the export.
		if err := mountDisk(l.disk, l.scratch, r.log); err != nil {
			return err
		}
		defer func() {
			if uerr := unmount(l.scratch); uerr != nil {
				r.log.Error("unmount after export", "sandbox", id, "err", uerr)
			}
		}()
	}
	return exportTree(ctx, l.upper, w, r.log.With("sandbox", id, "op", "export"))
}

type exporter struct {
	ctx  context.Context
	tw   *tar.Writer
	warn func(msg string, args ...any)
}

// exportTree writes the overlay upper directory at dir as a tar stream.
func exportTree(ctx context.Context, dir string, w io.Writer, log interface {
	Warn(msg string, args ...any)
}) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("oci: open writable layer: %w", err)
	}
	e := &exporter{ctx: ctx, tw: tar.NewWriter(w), warn: log.Warn}
	err = e.dir(fd, "", 0, true)
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := e.tw.Close(); err != nil {
		return fmt.Errorf("oci: write layer tar: %w", err)
	}
	return nil
}

// dir writes the entries of the directory open at fd, whose archive name
// is name ("" for the root). It takes no ownership of fd.
func (e *exporter) dir(fd int, name string, depth int, top bool) error {
	if depth > maxExportDepth {
		return fmt.Errorf("oci: writable layer nests deeper than %d: %w", maxExportDepth, errdefs.ErrFailedPrecondition)
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if name != "" && isOpaque(fd) {
		if err := e.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(name, ".wh..wh..opq"), Mode: 0o644, ModTime: time.Unix(0, 0)}); err != nil {
			return fmt.Errorf("oci: write layer tar: %w", err)
		}
	}
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		// Paddock's own mount points, created by the runtime in the
		// upper layer, are not the sandbox's changes.
		if top && n == ".paddock" {
			continue
		}
		if err := e.entry(fd, name, n, depth); err != nil {
			return err
		}
	}
	return nil
}

func readDirNames(fd int) ([]string, error) {
	// Reading through a dup keeps the caller's fd offset untouched.
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("oci: read writable layer: %w", err)
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("oci: read writable layer: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

func isOpaque(fd int) bool {
	buf := make([]byte, 8)
	n, err := unix.Fgetxattr(fd, "trusted.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

func (e *exporter) entry(dirfd int, parent, n string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed while we read: not part of the layer any more
		}
		return fmt.Errorf("oci: stat in writable layer: %w", err)
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
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		cfd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return nil
			}
			return fmt.Errorf("oci: open dir in writable layer: %w", err)
		}
		defer unix.Close(cfd)
		hdr.Typeflag = tar.TypeDir
		hdr.Name = name + "/"
		if err := e.tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("oci: write layer tar: %w", err)
		}
		return e.dir(cfd, name, depth+1, false)
	case unix.S_IFLNK:
		target, err := readlinkat(dirfd, n)
		if err != nil {
			return nil
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
		if err := e.tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("oci: write layer tar: %w", err)
		}
		return nil
	case unix.S_IFCHR:
		if unix.Major(uint64(st.Rdev)) == 0 && unix.Minor(uint64(st.Rdev)) == 0 {
			// overlayfs records a deletion as a 0/0 character device.
			wh := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(parent, ".wh."+n), Mode: 0o644, ModTime: hdr.ModTime}
			if err := e.tw.WriteHeader(wh); err != nil {
				return fmt.Errorf("oci: write layer tar: %w", err)
			}
			return nil
		}
		e.warn("skipping device node in writable layer", "path", name)
		return nil
	case unix.S_IFREG:
		return e.regular(dirfd, n, hdr, &st)
	default:
		e.warn("skipping special file in writable layer", "path", name)
		return nil
	}
}

func (e *exporter) regular(dirfd int, n string, hdr *tar.Header, pre *unix.Stat_t) error {
	// O_NONBLOCK: a FIFO swapped in after the stat must not block the open.
	fd, err := unix.Openat(dirfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return fmt.Errorf("oci: open file in writable layer: %w", err)
	}
	f := os.NewFile(uintptr(fd), n)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("oci: stat file in writable layer: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != pre.Ino || st.Dev != pre.Dev {
		e.warn("file changed type while exporting; skipped", "path", hdr.Name)
		return nil
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Size = st.Size
	if err := e.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("oci: write layer tar: %w", err)
	}
	// The header promised st.Size bytes: a file that shrinks meanwhile is
	// padded with zeros, one that grows is cut, so the stream stays valid.
	copied, err := io.Copy(e.tw, io.LimitReader(f, st.Size))
	if err != nil {
		return fmt.Errorf("oci: copy file from writable layer: %w", err)
	}
	if copied < st.Size {
		if _, err := io.CopyN(e.tw, zeroReader{}, st.Size-copied); err != nil {
			return fmt.Errorf("oci: write layer tar: %w", err)
		}
	}
	return nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
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
	return "", fmt.Errorf("oci: symlink target too long: %w", fs.ErrInvalid)
}
