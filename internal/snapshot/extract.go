package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/tarsafe"
)

// Limits bound what Extract accepts from a stream.
type Limits struct {
	// MaxEntries bounds the number of tar entries (default 1<<20).
	MaxEntries int
	// MaxBytes bounds the sum of file sizes (default 64 GiB). An entry
	// that would pass it is refused before any of it is written.
	MaxBytes int64
}

const (
	maxNameLen  = 4096
	maxXattrLen = 64 << 10
)

// ErrUnsafeArchive is wrapped by every refusal of an archive entry that
// could escape the target directory or create something a layer must not
// hold. It is also an errdefs.ErrInvalidArgument.
var ErrUnsafeArchive = fmt.Errorf("unsafe archive entry: %w", errdefs.ErrInvalidArgument)

func unsafeEntry(name, why string) error {
	return fmt.Errorf("%w: %q %s", ErrUnsafeArchive, truncate(name, 200), why)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Extract unpacks the tar stream r into dir, an empty directory. It is the
// inverse of WriteTree and is as strict as WriteTree's output is regular:
// every parent directory must come before its contents, no path repeats,
// names are relative and never contain "..", nothing is written through a
// symlink, and the only entry types are directories, regular files,
// symlinks and overlay whiteouts (0/0 character devices). Hard links,
// other devices and FIFOs are refused.
func Extract(ctx context.Context, r io.Reader, dir string, lim Limits) error {
	_, err := extract(ctx, r, dir, lim)
	return err
}

// extract is Extract that also returns the bytes of file content written.
func extract(ctx context.Context, r io.Reader, dir string, lim Limits) (int64, error) {
	if lim.MaxEntries <= 0 {
		lim.MaxEntries = 1 << 20
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = 64 << 30
	}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("snapshot: open target: %w", err)
	}
	defer unix.Close(root)
	x := &extractor{root: root, chown: os.Geteuid() == 0}
	tr := tar.NewReader(r)
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return x.written, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.written, fmt.Errorf("snapshot: read archive (truncated or corrupt): %v: %w", err, errdefs.ErrInvalidArgument)
		}
		if i >= lim.MaxEntries {
			return x.written, fmt.Errorf("snapshot: archive has more than %d entries: %w", lim.MaxEntries, errdefs.ErrResourceExhausted)
		}
		if tarsafe.Sparse(hdr) {
			// archive/tar would fill the holes with zeros: a few bytes of
			// archive, gigabytes on disk.
			return x.written, unsafeEntry(hdr.Name, "is a sparse file (snapshots hold none)")
		}
		if hdr.Typeflag == tar.TypeReg {
			if hdr.Size < 0 || x.written+hdr.Size > lim.MaxBytes {
				return x.written, fmt.Errorf("snapshot: archive holds more than %d bytes: %w", lim.MaxBytes, errdefs.ErrResourceExhausted)
			}
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.written, err
		}
	}
	return x.written, x.finish()
}

type extractor struct {
	root  int
	chown bool
	dirs  []dirTimes
	// written counts the bytes of file content written so far.
	written int64
}

type dirTimes struct {
	parts []string
	mtime unix.Timespec
}

// splitName validates an entry name and returns its components.
func splitName(name string) ([]string, error) {
	n := strings.TrimSuffix(name, "/")
	switch {
	case n == "" || n == ".":
		return nil, unsafeEntry(name, "has no name")
	case len(n) > maxNameLen:
		return nil, unsafeEntry(name, "has a name that is too long")
	case strings.HasPrefix(n, "/"):
		return nil, unsafeEntry(name, "is an absolute path")
	case strings.ContainsRune(n, 0):
		return nil, unsafeEntry(name, "contains a NUL byte")
	}
	parts := strings.Split(n, "/")
	if len(parts) > maxDepth {
		return nil, unsafeEntry(name, "nests too deep")
	}
	for _, p := range parts {
		switch p {
		case "..":
			return nil, unsafeEntry(name, "climbs out with ..")
		case "", ".":
			return nil, unsafeEntry(name, "is not a clean path")
		}
	}
	return parts, nil
}

// openParent opens the directory holding parts' last element, refusing
// any symlink on the way.
func (x *extractor) openParent(name string, parts []string) (int, error) {
	fd, err := unix.Dup(x.root)
	if err != nil {
		return -1, fmt.Errorf("snapshot: %w", err)
	}
	for _, p := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
			return -1, unsafeEntry(name, "would be written through a symlink or a file")
		case errors.Is(err, unix.ENOENT):
			return -1, unsafeEntry(name, "comes before its parent directory")
		case err != nil:
			return -1, fmt.Errorf("snapshot: open %s: %w", truncate(name, 200), err)
		}
		fd = next
	}
	return fd, nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	parts, err := splitName(hdr.Name)
	if err != nil {
		return err
	}
	xattrs, err := entryXattrs(hdr)
	if err != nil {
		return err
	}
	if hdr.Mode < 0 || hdr.Mode > 0o7777 {
		return unsafeEntry(hdr.Name, "has an invalid mode")
	}
	if hdr.Uid < 0 || hdr.Gid < 0 || hdr.Uid > 1<<31 || hdr.Gid > 1<<31 {
		return unsafeEntry(hdr.Name, "has an invalid owner")
	}
	mode := uint32(hdr.Mode)
	mtime := unix.NsecToTimespec(hdr.ModTime.UnixNano())
	if hdr.ModTime.IsZero() {
		mtime = unix.Timespec{}
	}
	parent, err := x.openParent(hdr.Name, parts)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	base := parts[len(parts)-1]
	exists := func(err error) error {
		if errors.Is(err, unix.EEXIST) {
			return unsafeEntry(hdr.Name, "appears twice")
		}
		return fmt.Errorf("snapshot: create %s: %w", truncate(hdr.Name, 200), err)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := unix.Mkdirat(parent, base, 0o700); err != nil {
			return exists(err)
		}
		fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("snapshot: open %s: %w", truncate(hdr.Name, 200), err)
		}
		defer unix.Close(fd)
		if err := x.attrs(fd, hdr, mode, xattrs); err != nil {
			return err
		}
		// A directory's time is set last, once nothing more is created in it.
		x.dirs = append(x.dirs, dirTimes{parts: parts, mtime: mtime})
		return nil
	case tar.TypeReg:
		fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return exists(err)
		}
		f := os.NewFile(uintptr(fd), base)
		defer f.Close()
		n, err := io.Copy(f, io.LimitReader(r, hdr.Size))
		x.written += n
		if err != nil {
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
				return fmt.Errorf("snapshot: no space left for the snapshot: %w", errdefs.ErrResourceExhausted)
			}
			return fmt.Errorf("snapshot: write %s: %v: %w", truncate(hdr.Name, 200), err, errdefs.ErrInvalidArgument)
		}
		if n != hdr.Size {
			return fmt.Errorf("snapshot: archive is truncated in %s: %w", truncate(hdr.Name, 200), errdefs.ErrInvalidArgument)
		}
		if err := x.attrs(fd, hdr, mode, xattrs); err != nil {
			return err
		}
		return unix.UtimesNanoAt(parent, base, []unix.Timespec{mtime, mtime}, unix.AT_SYMLINK_NOFOLLOW)
	case tar.TypeSymlink:
		if len(xattrs) > 0 {
			return unsafeEntry(hdr.Name, "is a symlink with extended attributes")
		}
		if hdr.Linkname == "" || len(hdr.Linkname) > maxNameLen || strings.ContainsRune(hdr.Linkname, 0) {
			return unsafeEntry(hdr.Name, "has an invalid symlink target")
		}
		// The target is stored, never followed: it is resolved inside
		// the sandbox's root, where it cannot reach the host.
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return exists(err)
		}
		return x.linkAttrs(parent, base, hdr, mtime)
	case tar.TypeChar:
		if hdr.Devmajor != 0 || hdr.Devminor != 0 {
			return unsafeEntry(hdr.Name, "is a device node")
		}
		if len(xattrs) > 0 {
			return unsafeEntry(hdr.Name, "is a whiteout with extended attributes")
		}
		if err := unix.Mknodat(parent, base, unix.S_IFCHR|0o600, 0); err != nil {
			return exists(err)
		}
		if err := x.linkAttrs(parent, base, hdr, mtime); err != nil {
			return err
		}
		// Not a symlink, so the mode applies to the node itself.
		return unix.Fchmodat(parent, base, mode, 0)
	case tar.TypeLink:
		return unsafeEntry(hdr.Name, "is a hard link (snapshots hold none)")
	case tar.TypeBlock, tar.TypeFifo:
		return unsafeEntry(hdr.Name, "is a device node or FIFO")
	default:
		return unsafeEntry(hdr.Name, fmt.Sprintf("has unsupported type %q", hdr.Typeflag))
	}
}

// attrs sets owner, mode and extended attributes on an open file. The
// mode goes last: chown clears set-id bits.
func (x *extractor) attrs(fd int, hdr *tar.Header, mode uint32, xattrs map[string]string) error {
	if x.chown {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return fmt.Errorf("snapshot: chown %s: %w", truncate(hdr.Name, 200), err)
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("snapshot: chmod %s: %w", truncate(hdr.Name, 200), err)
	}
	for k, v := range xattrs {
		set := func() error { return unix.Fsetxattr(fd, k, []byte(v), 0) }
		if k == opaqueXattr {
			set = func() error { return setOpaque(fd) }
		}
		if err := set(); err != nil {
			// The kernel judges a value's form: what it refuses is the
			// archive's fault, not the daemon's.
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ERANGE) || errors.Is(err, unix.E2BIG) || errors.Is(err, unix.EOVERFLOW) {
				return unsafeEntry(hdr.Name, fmt.Sprintf("carries extended attribute %s, whose value the file system refuses (%v)", truncate(k, 60), err))
			}
			return fmt.Errorf("snapshot: set xattr %s on %s: %w", k, truncate(hdr.Name, 200), err)
		}
	}
	return nil
}

func (x *extractor) linkAttrs(parent int, base string, hdr *tar.Header, mtime unix.Timespec) error {
	if x.chown {
		if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("snapshot: chown %s: %w", truncate(hdr.Name, 200), err)
		}
	}
	return unix.UtimesNanoAt(parent, base, []unix.Timespec{mtime, mtime}, unix.AT_SYMLINK_NOFOLLOW)
}

// capXattr holds a file's capabilities, in the kernel's vfs_cap_data
// form: a little-endian magic word whose top byte is the revision, then
// 32-bit permitted and inheritable words (two of each from revision 2),
// then, in revision 3, the root uid of the namespace.
const capXattr = "security.capability"

// validCapability checks a security.capability value's length against
// its revision, as the kernel does before it takes one.
func validCapability(v string) bool {
	if len(v) < 4 {
		return false
	}
	magic := uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24
	const effective = 0x000001
	if magic&^(0xff000000|effective) != 0 {
		return false
	}
	switch magic >> 24 {
	case 1:
		return len(v) == 12
	case 2:
		return len(v) == 20
	case 3:
		return len(v) == 24
	}
	return false
}

// entryXattrs returns the extended attributes an entry carries, refusing
// any a snapshot does not keep.
func entryXattrs(hdr *tar.Header) (map[string]string, error) {
	var out map[string]string
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, xattrPrefix)
		if !ok {
			continue
		}
		if !keptXattr(name) || len(v) > maxXattrLen {
			return nil, unsafeEntry(hdr.Name, "carries extended attribute "+truncate(name, 60)+", which snapshots do not hold")
		}
		if name == opaqueXattr && (hdr.Typeflag != tar.TypeDir || v != "y") {
			return nil, unsafeEntry(hdr.Name, "carries a malformed overlay opaque marker")
		}
		if name == capXattr && !validCapability(v) {
			return nil, unsafeEntry(hdr.Name, "carries a malformed security.capability attribute (not a version 1, 2 or 3 file capability set)")
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = v
	}
	return out, nil
}

// finish sets directory times, now that their contents are complete.
func (x *extractor) finish() error {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		parent, err := x.openParent(strings.Join(d.parts, "/"), d.parts)
		if err != nil {
			return err
		}
		err = unix.UtimesNanoAt(parent, d.parts[len(d.parts)-1], []unix.Timespec{d.mtime, d.mtime}, unix.AT_SYMLINK_NOFOLLOW)
		unix.Close(parent)
		if err != nil {
			return fmt.Errorf("snapshot: set directory time: %w", err)
		}
	}
	return nil
}
