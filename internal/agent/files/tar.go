package files

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// tarOverhead allows for headers and padding on top of the content bytes a
// tar upload may carry.
const tarOverhead = 64 << 20

// tarLimits bound one extraction.
type tarLimits struct {
	maxBytes   int64
	maxEntries int
}

// errTarTooLarge marks an upload over its limits (413, not 507).
var errTarTooLarge = fmt.Errorf("tar stream exceeds the upload limits: %w", errdefs.ErrResourceExhausted)

func (s *Service) handleTarOut(w http.ResponseWriter, r *http.Request) {
	dir, real, ok := s.outDir(w, r)
	if !ok {
		return
	}
	o := tarOptions{xdev: r.URL.Query().Get("one_file_system") == "true"}
	if v := r.URL.Query().Get("unchanged_before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			reply.Error(w, errdefs.Invalid("unchanged_before must be a time in nanoseconds since 1970"))
			return
		}
		o.unchangedBefore = n
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Cache-Control", "no-store")
	if err := writeTar(r.Context(), w, real, o); err != nil {
		s.log.Debug("tar out aborted", "path", dir, "err", err)
		// Headers are sent: breaking the stream is the only way to keep
		// the client from taking a cut-short archive for a whole one.
		panic(http.ErrAbortHandler)
	}
}

// outDir resolves the directory a request asks to read out, as its user:
// the path asked and the real one (symlinks resolved). It answers the
// request itself when not ok.
func (s *Service) outDir(w http.ResponseWriter, r *http.Request) (dir, real string, ok bool) {
	u, err := s.userFor(r.Context(), r.URL.Query().Get("username"))
	if err != nil {
		reply.Status(w, http.StatusUnauthorized, reply.Public(err))
		return "", "", false
	}
	dir, err = users.ResolvePath(u, r.URL.Query().Get("path"))
	if err != nil {
		reply.Error(w, err)
		return "", "", false
	}
	real, err = filepath.EvalSymlinks(dir)
	if err != nil {
		reply.Error(w, safefs.Error("read", dir, err))
		return "", "", false
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		reply.Error(w, errdefs.Invalid("%s is not a directory", dir))
		return "", "", false
	}
	return dir, real, true
}

// walkLive walks dir's tree (not dir itself), calling fn with each entry's
// path, its name relative to dir and its Lstat. The tree is live: what
// vanishes or cannot be read on the way is passed over.
func walkLive(ctx context.Context, dir string, fn func(p, rel string, fi fs.FileInfo) error) error {
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return nil
		}
		return fn(p, rel, fi)
	})
}

// tarOptions tune writeTar.
type tarOptions struct {
	// xdev: what is on another filesystem than the directory is named as
	// a mount point (wire.MountPointRecord) and not read.
	xdev bool
	// unchangedBefore (nanoseconds since 1970; 0: off): a regular file
	// whose inode last changed before it comes without its content,
	// marked wire.UnchangedRecord.
	unchangedBefore int64
}

// writeTar writes dir's tree with names relative to it. Symlinks are
// stored as links, never followed; sockets, devices and fifos are skipped.
func writeTar(ctx context.Context, w io.Writer, dir string, o tarOptions) error {
	tw := tar.NewWriter(w)
	var rootDev uint64
	if o.xdev {
		fi, err := os.Lstat(dir)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no device number", dir)
		}
		rootDev = st.Dev
	}
	err := walkLive(ctx, dir, func(p, rel string, fi fs.FileInfo) error {
		if st, ok := fi.Sys().(*syscall.Stat_t); o.xdev && ok && st.Dev != rootDev {
			typ := byte(tar.TypeReg)
			if fi.IsDir() {
				typ = tar.TypeDir
			}
			hdr := &tar.Header{Typeflag: typ, Name: filepath.ToSlash(rel), Mode: 0o755, Format: tar.FormatPAX,
				PAXRecords: map[string]string{wire.MountPointRecord: "1"}}
			if fi.IsDir() {
				hdr.Name += "/"
				if err := tw.WriteHeader(hdr); err != nil {
					return err
				}
				return filepath.SkipDir
			}
			return tw.WriteHeader(hdr)
		}
		var link string
		var err error
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return nil
			}
		case fi.IsDir(), fi.Mode().IsRegular():
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		if !fi.Mode().IsRegular() {
			return tw.WriteHeader(hdr)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ctim.Nano() < o.unchangedBefore {
			hdr.Size = 0
			hdr.PAXRecords = map[string]string{wire.UnchangedRecord: "1"}
			return tw.WriteHeader(hdr)
		}
		// Non-blocking and checked again: a file swapped for a pipe since
		// the walk saw it is skipped, not waited on.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil
		}
		if _, err := safefs.CheckRegular(f, p); err != nil {
			return nil
		}
		defer f.Close()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
		if err != nil {
			return err
		}
		// A file that shrank while being read is padded to its header size.
		if n < hdr.Size {
			if _, err := io.CopyN(tw, zeroReader{}, hdr.Size-n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func (s *Service) handleTarIn(w http.ResponseWriter, r *http.Request) {
	u, err := s.userFor(r.Context(), r.URL.Query().Get("username"))
	if err != nil {
		reply.Status(w, http.StatusUnauthorized, reply.Public(err))
		return
	}
	dir, err := users.ResolvePath(u, r.URL.Query().Get("path"))
	if err != nil {
		reply.Error(w, err)
		return
	}
	lim := tarLimits{maxBytes: s.opts.MaxTarBytes, maxEntries: s.opts.MaxTarEntries}
	if err := extractTar(r.Context(), r.Body, dir, u, lim); err != nil {
		if errors.Is(err, errTarTooLarge) {
			reply.Status(w, http.StatusRequestEntityTooLarge, reply.Public(err))
			return
		}
		reply.Error(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// countingReader fails once more than n bytes were read.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errTarTooLarge
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// extractTar unpacks a tar stream under dir, as u. The stream is
// untrusted: names must stay under dir (no absolute names, no ".."), no
// entry may be written through a symlink (so a link planted by an earlier
// entry or already in the tree cannot redirect a later one), hard links
// must point at regular files under dir, and device nodes and fifos are
// refused. Entries before a refused one stay extracted.
func extractTar(ctx context.Context, body io.Reader, dir string, u *users.User, lim tarLimits) error {
	if err := mkdirAllOwned(dir, u); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return safefs.Error("extract", dir, err)
	}
	tr := tar.NewReader(&countingReader{r: body, n: lim.maxBytes + tarOverhead})
	var total int64
	for entries := 0; ; entries++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if errors.Is(err, errTarTooLarge) {
				return errTarTooLarge
			}
			return errdefs.Invalid("invalid tar stream: %v", err)
		}
		if entries >= lim.maxEntries {
			return errTarTooLarge
		}
		if hdr.Size < 0 || total+hdr.Size > lim.maxBytes {
			return errTarTooLarge
		}
		total += hdr.Size
		if err := extractEntry(tr, hdr, real, u); err != nil {
			return err
		}
	}
}

// cleanTarName validates an entry name and returns it relative and clean;
// "" means the archive's root.
func cleanTarName(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 || len(name) > users.MaxPathLen {
		return "", errdefs.Invalid("tar entry name is invalid")
	}
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, "\\") {
		return "", errdefs.Invalid("tar entry %q has an absolute name", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errdefs.Invalid("tar entry %q contains ..", name)
		}
	}
	clean := filepath.Clean(name)
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// parentsSafe makes sure every directory between root and rel's last
// component is a real directory (creating missing ones), never a symlink.
func parentsSafe(root, rel string, u *users.User) error {
	parts := strings.Split(filepath.Dir(rel), string(filepath.Separator))
	cur := root
	for _, part := range parts {
		if part == "." || part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return safefs.Error("extract", cur, err)
			}
			if err := chownTo(cur, u); err != nil {
				return err
			}
		case err != nil:
			return safefs.Error("extract", cur, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return errdefs.Invalid("tar entry %q would be written through the symlink %s", rel, part)
		case !fi.IsDir():
			return errdefs.Invalid("tar entry %q needs %s to be a directory", rel, part)
		}
	}
	return nil
}

// clearTarget removes what stands at path unless it is a directory, so a
// new entry replaces it instead of writing through it.
func clearTarget(path string) (isDir bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, safefs.Error("extract", path, err)
	}
	if fi.IsDir() {
		return true, nil
	}
	if err := os.Remove(path); err != nil {
		return false, safefs.Error("extract", path, err)
	}
	return false, nil
}

func extractEntry(tr *tar.Reader, hdr *tar.Header, root string, u *users.User) error {
	rel, err := cleanTarName(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "" {
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return errdefs.Invalid("tar entry %q is a device, fifo or other special file", hdr.Name)
	}
	if err := parentsSafe(root, rel, u); err != nil {
		return err
	}
	path := filepath.Join(root, rel)
	isDir, err := clearTarget(path)
	if err != nil {
		return err
	}
	if isDir && hdr.Typeflag != tar.TypeDir {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("tar entry %q would replace a non-empty directory: %w", hdr.Name, errdefs.ErrConflict)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		perm := os.FileMode(hdr.Mode&0o1777) | 0o700
		if !isDir {
			if err := os.Mkdir(path, perm); err != nil {
				return safefs.Error("extract", path, err)
			}
		}
		if err := os.Chmod(path, perm); err != nil {
			return safefs.Error("extract", path, err)
		}
		return entryOwner(path, hdr, u)
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 || len(hdr.Linkname) > users.MaxPathLen {
			return errdefs.Invalid("tar entry %q has an invalid link target", hdr.Name)
		}
		if err := os.Symlink(hdr.Linkname, path); err != nil {
			return safefs.Error("extract", path, err)
		}
		return entryOwner(path, hdr, u)
	case tar.TypeLink:
		target, err := cleanTarName(hdr.Linkname)
		if err != nil || target == "" {
			return errdefs.Invalid("tar entry %q is a hard link outside the target directory", hdr.Name)
		}
		if err := parentsSafe(root, target, u); err != nil {
			return err
		}
		src := filepath.Join(root, target)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			return errdefs.Invalid("tar entry %q links to %q, which is not a regular file extracted before it", hdr.Name, hdr.Linkname)
		}
		if err := os.Link(src, path); err != nil {
			return safefs.Error("extract", path, err)
		}
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, os.FileMode(hdr.Mode&0o777))
	if err != nil {
		return safefs.Error("extract", path, err)
	}
	if _, err := io.Copy(f, tr); err != nil {
		_ = f.Close()
		if errors.Is(err, errTarTooLarge) {
			return errTarTooLarge
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return safefs.Error("extract", path, err)
		}
		return errdefs.Invalid("invalid tar stream: %v", err)
	}
	if err := f.Chmod(os.FileMode(hdr.Mode & 0o777)); err != nil {
		_ = f.Close()
		return safefs.Error("extract", path, err)
	}
	if err := f.Close(); err != nil {
		return safefs.Error("extract", path, err)
	}
	if !hdr.ModTime.IsZero() {
		_ = os.Chtimes(path, time.Time{}, hdr.ModTime)
	}
	return entryOwner(path, hdr, u)
}

// entryOwner gives an extracted entry its owner. Extracting as root keeps
// the archive's numeric owners (as tar does for root), so an archive of a
// sandbox's files round-trips; any other user owns what it extracts.
func entryOwner(path string, hdr *tar.Header, u *users.User) error {
	if u.UID != 0 || os.Geteuid() != 0 {
		return chownTo(path, u)
	}
	if hdr.Uid < 0 || hdr.Gid < 0 || hdr.Uid > 1<<31-2 || hdr.Gid > 1<<31-2 {
		return errdefs.Invalid("tar entry %q has an invalid owner %d:%d", hdr.Name, hdr.Uid, hdr.Gid)
	}
	if err := os.Lchown(path, hdr.Uid, hdr.Gid); err != nil {
		return safefs.Error("chown", path, err)
	}
	return nil
}
