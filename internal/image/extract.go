package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/tarsafe"
)

// Bounds on one layer tar. A layer is untrusted input: these keep a hostile
// one from filling the disk or the inode table of the host.
const (
	DefaultMaxLayerBytes   = 16 << 30
	DefaultMaxLayerEntries = 1 << 20
	maxEntryName           = 4096
	maxEntryDepth          = 128
)

// Overlay whiteout spellings in OCI/docker layer tars.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
	// userOpaqueXattr is the marker where this process may not set
	// trusted.* attributes (a daemon without CAP_SYS_ADMIN, as in a
	// Kubernetes pod): overlayfs's own name under its userxattr option.
	// The store reads either as an opaque directory (treeWalker.walk).
	userOpaqueXattr = "user.overlay.opaque"
)

// ExtractOptions bounds one extraction; zero values take the defaults.
type ExtractOptions struct {
	MaxBytes   int64 // file content summed over the layer
	MaxEntries int
	// Budget, when set, is charged each file's size before the file is
	// written; an error from it fails the layer with nothing of that file
	// written.
	Budget Budget
}

// Budget is what an import may still write to disk.
type Budget interface {
	Charge(n int64) error
}

// ExtractStats says what a layer held.
type ExtractStats struct {
	Entries int
	Bytes   int64
	// Stripped counts files whose setuid/setgid bits were removed.
	Stripped int
}

// ExtractLayer unpacks an OCI/docker layer tar into root, an existing empty
// directory, as an overlay lower dir: `.wh.x` becomes a 0/0 character
// device and `.wh..wh..opq` the trusted.overlay.opaque xattr.
//
// The tar is hostile input. Every path is walked one component at a time
// with openat and O_NOFOLLOW, so nothing is ever written outside root, even
// through a symlink an earlier entry planted. Names with "..", absolute
// names, relative symlinks whose target climbs out of the layer, hard links
// to anything but a file of this layer, and device nodes are refused;
// setuid/setgid bits are stripped and extended attributes are not applied
// (so file capabilities are dropped). Any refusal fails the whole layer.
func ExtractLayer(ctx context.Context, r io.Reader, root string, opts ExtractOptions) (ExtractStats, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxLayerBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxLayerEntries
	}
	rootFD, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ExtractStats{}, fmt.Errorf("layer directory: %w", err)
	}
	x := &extractor{root: rootFD, opts: opts, files: make(map[string]bool)}
	defer x.close()
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return x.stats, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.stats, badLayer("reading tar: %v", err)
		}
		x.stats.Entries++
		if x.stats.Entries > opts.MaxEntries {
			return x.stats, badLayer("more than %d entries", opts.MaxEntries)
		}
		if tarsafe.Sparse(hdr) {
			// archive/tar would expand the holes: a few bytes of layer
			// would be gigabytes on disk.
			return x.stats, badLayer("entry %q is a sparse file; sparse entries are not supported", printable(hdr.Name))
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.stats, err
		}
	}
	return x.stats, nil
}

func badLayer(format string, args ...any) error {
	return fmt.Errorf("layer refused: "+format+": %w", append(args, errdefs.ErrInvalidArgument)...)
}

type extractor struct {
	root  int
	opts  ExtractOptions
	stats ExtractStats
	// files holds the regular files written so far: the only things a hard
	// link may point at.
	files map[string]bool
	// One open parent directory, reused while entries stay in it (tars list
	// a directory's files together).
	dirPath string
	dirFD   int
}

func (x *extractor) close() {
	if x.dirPath != "" {
		unix.Close(x.dirFD)
	}
	unix.Close(x.root)
}

// cleanName turns a tar name into a relative path inside the layer, or
// refuses it. "" means the layer root itself.
func cleanName(name string) (string, error) {
	if len(name) > maxEntryName {
		return "", badLayer("entry name longer than %d bytes", maxEntryName)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", badLayer("entry name %q has a NUL byte", printable(name))
	}
	if strings.HasPrefix(name, "/") {
		return "", badLayer("entry %q has an absolute name", printable(name))
	}
	parts := strings.Split(name, "/")
	out := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", badLayer("entry %q climbs out of the layer with ..", printable(name))
		}
		out = append(out, p)
	}
	if len(out) > maxEntryDepth {
		return "", badLayer("entry %q is nested deeper than %d", printable(name), maxEntryDepth)
	}
	return strings.Join(out, "/"), nil
}

func (x *extractor) entry(hdr *tar.Header, body io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the root keeps the mode the store gives it
		}
		return badLayer("entry %q is not a directory", printable(hdr.Name))
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	dfd, err := x.parent(dir)
	if err != nil {
		return err
	}
	if base == whiteoutOpaque {
		err := unix.Fsetxattr(dfd, opaqueXattr, []byte("y"), 0)
		if errors.Is(err, unix.EPERM) {
			err = unix.Fsetxattr(dfd, userOpaqueXattr, []byte("y"), 0)
		}
		if err != nil {
			return fmt.Errorf("layer entry %q: setting opaque xattr: %w", printable(hdr.Name), err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		hidden := base[len(whiteoutPrefix):]
		if hidden == "" || hidden == "." || hidden == ".." {
			return badLayer("entry %q is a malformed whiteout", printable(hdr.Name))
		}
		if err := x.clear(dfd, hidden); err != nil {
			return err
		}
		if err := unix.Mknodat(dfd, hidden, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("layer entry %q: creating whiteout: %w", printable(hdr.Name), err)
		}
		return nil
	}
	mode := uint32(hdr.Mode) & 0o7777
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 && hdr.Typeflag != tar.TypeDir {
		mode &^= unix.S_ISUID | unix.S_ISGID
		x.stats.Stripped++
	}
	mode &^= unix.S_ISUID // setgid on a directory only means group inheritance
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.mkdir(dfd, base, mode)
	case tar.TypeReg:
		err = x.file(dfd, name, base, mode, hdr, body)
	case tar.TypeSymlink:
		err = x.symlink(dfd, name, base, hdr.Linkname)
	case tar.TypeLink:
		err = x.hardlink(dfd, name, base, hdr.Linkname)
	case tar.TypeFifo:
		if err = x.clear(dfd, base); err == nil {
			err = unix.Mkfifoat(dfd, base, mode)
		}
	case tar.TypeChar, tar.TypeBlock:
		return badLayer("entry %q is a device node", printable(hdr.Name))
	default:
		return badLayer("entry %q has unsupported type %q", printable(hdr.Name), hdr.Typeflag)
	}
	if err != nil {
		if errors.Is(err, errdefs.ErrInvalidArgument) {
			return err
		}
		return fmt.Errorf("layer entry %q: %w", printable(hdr.Name), err)
	}
	if err := unix.Fchownat(dfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("layer entry %q: chown: %w", printable(hdr.Name), err)
	}
	if hdr.Typeflag != tar.TypeSymlink && hdr.Typeflag != tar.TypeLink {
		// chown clears setgid on some filesystems; set the mode last.
		if err := unix.Fchmodat(dfd, base, mode, 0); err != nil {
			return fmt.Errorf("layer entry %q: chmod: %w", printable(hdr.Name), err)
		}
	}
	if !hdr.ModTime.IsZero() && hdr.Typeflag != tar.TypeLink {
		ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
		_ = unix.UtimesNanoAt(dfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// parent opens dir (relative to the root) without following any symlink,
// creating missing directories, and returns its fd (owned by x).
func (x *extractor) parent(dir string) (int, error) {
	if dir == "" {
		return x.root, nil
	}
	if x.dirPath == dir {
		return x.dirFD, nil
	}
	if x.dirPath != "" {
		unix.Close(x.dirFD)
		x.dirPath = ""
	}
	cur := x.root
	for _, comp := range strings.Split(dir, "/") {
		fd, err := unix.Openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(cur, comp, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = unix.Openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if cur != x.root {
			unix.Close(cur)
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, badLayer("path %q goes through a symlink or a non-directory", printable(dir))
		}
		if err != nil {
			return -1, fmt.Errorf("layer directory %q: %w", printable(dir), err)
		}
		cur = fd
	}
	x.dirPath, x.dirFD = dir, cur
	return cur, nil
}

// clear removes whatever non-directory sits at base, so a later entry
// replaces an earlier one, as tar semantics say.
func (x *extractor) clear(dfd int, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return badLayer("entry %q replaces a directory", printable(base))
	}
	return unix.Unlinkat(dfd, base, 0)
}

func (x *extractor) mkdir(dfd int, base string, mode uint32) error {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil // listed again: its mode is updated by the caller
	}
	if err == nil {
		if err := unix.Unlinkat(dfd, base, 0); err != nil {
			return err
		}
	}
	// The cached parent fd stays valid: directories are never removed or
	// replaced during an extraction (clear refuses to).
	return unix.Mkdirat(dfd, base, 0o700)
}

func (x *extractor) file(dfd int, name, base string, mode uint32, hdr *tar.Header, body io.Reader) error {
	if hdr.Size < 0 || x.stats.Bytes+hdr.Size > x.opts.MaxBytes {
		return badLayer("files larger than %d bytes in total", x.opts.MaxBytes)
	}
	if x.opts.Budget != nil {
		if err := x.opts.Budget.Charge(hdr.Size); err != nil {
			return err
		}
	}
	if err := x.clear(dfd, base); err != nil {
		return err
	}
	fd, err := unix.Openat(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	w := &fdWriter{fd: fd}
	n, err := io.Copy(w, io.LimitReader(body, hdr.Size))
	cerr := unix.Close(fd)
	x.stats.Bytes += n
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return badLayer("entry %q is truncated", printable(hdr.Name))
	}
	if cerr != nil {
		return cerr
	}
	x.files[name] = true
	return nil
}

func (x *extractor) symlink(dfd int, name, base, target string) error {
	if target == "" || len(target) > maxEntryName || strings.IndexByte(target, 0) >= 0 {
		return badLayer("symlink %q has an invalid target", printable(name))
	}
	// An absolute target is resolved inside the sandbox's root, never on
	// the host (nothing here follows links), so it is kept. A relative one
	// that climbs above the layer's root has no honest use.
	if !strings.HasPrefix(target, "/") {
		depth := strings.Count(name, "/")
		for _, p := range strings.Split(target, "/") {
			switch p {
			case "", ".":
			case "..":
				depth--
			default:
				depth++
			}
			if depth < 0 {
				return badLayer("symlink %q -> %q points outside the layer", printable(name), printable(target))
			}
		}
	}
	if err := x.clear(dfd, base); err != nil {
		return err
	}
	return unix.Symlinkat(target, dfd, base)
}

func (x *extractor) hardlink(dfd int, name, base, target string) error {
	t, err := cleanName(target)
	if err != nil || t == "" || !x.files[t] {
		return badLayer("hard link %q -> %q does not point at a file of this layer", printable(name), printable(target))
	}
	tdir, tbase := path.Split(t)
	tdir = strings.TrimSuffix(tdir, "/")
	if err := x.clear(dfd, base); err != nil {
		return err
	}
	// Open the target's directory the same careful way; the cache holds
	// one directory, so link from a private fd.
	saved, savedFD := x.dirPath, x.dirFD
	x.dirPath = ""
	tfd, err := x.parent(tdir)
	if err != nil {
		x.dirPath, x.dirFD = saved, savedFD
		return err
	}
	err = unix.Linkat(tfd, tbase, dfd, base, 0)
	if tdir != "" && tfd != savedFD {
		unix.Close(tfd)
	}
	x.dirPath, x.dirFD = saved, savedFD
	if err != nil {
		return err
	}
	x.files[name] = true
	return nil
}

type fdWriter struct{ fd int }

func (w *fdWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(w.fd, p[n:])
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return n, err
		}
		n += m
	}
	return n, nil
}
