package snapshot

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The object pool deduplicates files across layers. A committed layer's
// regular file of at least minLinkSize bytes is a hard link to an object
// in <Dir>/objects/<2 hex>/<62 hex>, named by objectKey: the sha256 of its
// content and of every piece of inode metadata the layer keeps (mode,
// owner, modification time, size, kept extended attributes). Everything a
// hard link shares is in the key, so two files are one inode only when a
// layer could not tell them apart. Layers stay ordinary directories that
// overlayfs stacks as lower layers; nothing writes to a committed layer,
// and a sandbox's writes to such a file are copied up into its own
// writable layer.
//
// A key may name up to maxVariants inodes (<key>, <key>.1, ...): a layer
// holding several equal files keeps them apart (see deduper.taken), and
// the next layer with the same files can still share each of them.
//
// An object appears in the pool only after its content is on disk: Commit
// flushes the layer's filesystem, then links each new file into the pool
// by one linkat, so a crash leaves a pool object whole or absent. An
// object whose link count is 1 is held only by the pool and is garbage.

// DefaultMinLinkSize is the smallest file the pool takes. Smaller files
// are copied into each layer: they occupy one block whichever way, and
// linking them costs a hash, a lookup and two more directory operations
// per file for at most a block saved (see docs/snapshots.md for the
// measurement).
const DefaultMinLinkSize = 16 << 10

// maxLinks stays under ext4's limit of 65000 links to one inode; a file
// whose object has this many is copied instead.
const maxLinks = 60000

// maxVariants bounds the inodes one key names in the pool.
const maxVariants = 8

// objectKeyVersion is hashed into every key, so a change to what a key
// covers names new objects rather than reusing old ones.
const objectKeyVersion = "paddock-object/v1"

func (s *Store) objectsDir() string { return filepath.Join(s.dir, "objects") }

// objectPath is where variant v of key's object lives.
func (s *Store) objectPath(key string, v int) string {
	name := key[2:]
	if v > 0 {
		name += "." + strconv.Itoa(v)
	}
	return filepath.Join(s.objectsDir(), key[:2], name)
}

// objectKey names a file's object: its content digest and the metadata
// the layer's tar header carries for it, each field length-delimited.
func objectKey(content []byte, hdr *tar.Header) string {
	h := sha256.New()
	b := make([]byte, 0, 256)
	b = appendField(b, objectKeyVersion)
	b = appendField(b, string(content))
	b = binary.AppendUvarint(b, uint64(hdr.Mode))
	b = binary.AppendUvarint(b, uint64(hdr.Uid))
	b = binary.AppendUvarint(b, uint64(hdr.Gid))
	b = binary.AppendVarint(b, hdr.ModTime.UnixNano())
	b = binary.AppendUvarint(b, uint64(hdr.Size))
	b = appendRecords(b, hdr.PAXRecords)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendRecords appends PAX records in sorted order.
func appendRecords(b []byte, recs map[string]string) []byte {
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendField(b, k)
		b = appendField(b, recs[k])
	}
	return b
}

type inode struct{ dev, ino uint64 }

// inodeBytes is what an inode costs the store: its allocated blocks, and
// at least 512 bytes, so a store of empty files or whiteouts is not free.
func inodeBytes(st *unix.Stat_t) int64 {
	return max(st.Blocks*512, 512)
}

// deduper links a layer's files into the pool while Commit walks it.
type deduper struct {
	s   *Store
	min int64
	// taken holds inodes the layer must not link to: those of the layers
	// it will be stacked on, and those it already links. Inside one
	// sandbox no two paths may share an inode, or they would look like
	// hard links to each other there.
	taken map[inode]bool
	// news are files no object matched, linked into the pool once the
	// layer is on disk.
	news []pendingObject
	// added is the disk space of the layer's inodes that are new to the
	// store; linked is the bytes of the files that were found in the pool.
	added  int64
	linked int64
}

type pendingObject struct{ name, key string }

// wants reports whether a file is large enough to be pooled.
func (d *deduper) wants(st *unix.Stat_t) bool {
	return d != nil && st.Size >= d.min
}

// file handles a regular file the walk just read; sum is its content
// digest when wants said yes. It reports whether the file was replaced
// by a link to a pool object.
func (d *deduper) file(dirfd int, n string, hdr *tar.Header, st *unix.Stat_t, sum []byte) (bool, error) {
	if sum == nil {
		d.added += inodeBytes(st)
		return false, nil
	}
	key := objectKey(sum, hdr)
	ok, err := d.link(dirfd, n, key, st)
	if err != nil {
		return false, err
	}
	if ok {
		d.linked += st.Size
		return true, nil
	}
	d.added += inodeBytes(st)
	d.news = append(d.news, pendingObject{name: hdr.Name, key: key})
	return false, nil
}

// link replaces dirfd/n with a hard link to a pool object for key the
// layer may use: the first variant it does not link already. An object's
// inode metadata is checked against the file's, so a pool damaged on disk
// costs deduplication, not correctness of what the layer describes.
func (d *deduper) link(dirfd int, n, key string, st *unix.Stat_t) (bool, error) {
	for v := 0; v < maxVariants; v++ {
		var ost unix.Stat_t
		if err := unix.Lstat(d.s.objectPath(key, v), &ost); err != nil {
			return false, nil
		}
		id := inode{ost.Dev, ost.Ino}
		if ost.Mode != st.Mode || ost.Uid != st.Uid || ost.Gid != st.Gid || ost.Size != st.Size ||
			ost.Mtim != st.Mtim || ost.Nlink >= maxLinks || d.taken[id] {
			continue
		}
		return d.linkTo(dirfd, n, d.s.objectPath(key, v), id)
	}
	return false, nil
}

func (d *deduper) linkTo(dirfd int, n, p string, id inode) (bool, error) {
	tmp, err := randomName(".paddock-link-")
	if err != nil {
		return false, err
	}
	if err := unix.Linkat(unix.AT_FDCWD, p, dirfd, tmp, 0); err != nil {
		// ENOENT: collected since the lookup; EMLINK: too many links.
		return false, nil
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, n); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return false, fmt.Errorf("snapshot: link %s to its pool object: %w", n, err)
	}
	d.taken[id] = true
	return true, nil
}

func randomName(prefix string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}

// publish links the layer's new files into the pool, each under the first
// free variant of its key. The layer at root must be on disk already
// (Commit flushed it), so no object is ever named before its content is
// durable. Failures cost deduplication only and are logged.
func (d *deduper) publish(root string) {
	if len(d.news) == 0 {
		return
	}
	rfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		d.s.log.Warn("object pool: open layer", "err", err)
		return
	}
	defer unix.Close(rfd)
	parentName, parent := "", -1
	defer func() {
		if parent >= 0 {
			unix.Close(parent)
		}
	}()
	for _, p := range d.news {
		dir, base := "", p.name
		if i := strings.LastIndexByte(p.name, '/'); i >= 0 {
			dir, base = p.name[:i], p.name[i+1:]
		}
		if parent < 0 || dir != parentName {
			if parent >= 0 {
				unix.Close(parent)
			}
			parentName, parent = dir, openBelow(rfd, dir)
		}
		if parent < 0 {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(d.s.objectPath(p.key, 0)), 0o700); err != nil {
			d.s.log.Warn("object pool: create directory", "err", err)
			return
		}
		for v := 0; v < maxVariants; v++ {
			err := unix.Linkat(parent, base, unix.AT_FDCWD, d.s.objectPath(p.key, v), 0)
			if errors.Is(err, unix.EEXIST) {
				continue
			}
			if err != nil {
				d.s.log.Warn("object pool: add object", "file", truncate(p.name, 200), "err", err)
			}
			break
		}
	}
}

// openBelow opens the directory rel (slash-separated, "" for root) under
// rfd without following symlinks; -1 if that fails.
func openBelow(rfd int, rel string) int {
	fd, err := unix.Dup(rfd)
	if err != nil {
		return -1
	}
	if rel == "" {
		return fd
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1
		}
		fd = next
	}
	return fd
}

// chainInodes returns the inodes of the shared files of stored layers, so
// a layer stacked on them links to none of those.
func (s *Store) chainInodes(below []string) map[inode]bool {
	out := map[inode]bool{}
	for _, d := range below {
		p, err := s.LayerPath(d)
		if err != nil {
			continue
		}
		_ = filepath.WalkDir(p, func(_ string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return nil
			}
			if info, err := e.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					out[inode{st.Dev, st.Ino}] = true
				}
			}
			return nil
		})
	}
	return out
}

// sweepObjects removes pool objects no layer links any more.
func (s *Store) sweepObjects() (int, error) {
	dirs, err := os.ReadDir(s.objectsDir())
	if err != nil {
		return 0, fmt.Errorf("snapshot: read object pool: %w", err)
	}
	removed := 0
	for _, e := range dirs {
		if !e.IsDir() {
			continue
		}
		n, err := sweepObjectDir(filepath.Join(s.objectsDir(), e.Name()))
		removed += n
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

func sweepObjectDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("snapshot: sweep object pool: %w", err)
	}
	defer unix.Close(fd)
	names, err := dirNames(fd)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		// A commit may link the object between this stat and the unlink;
		// its layer then keeps the inode and only the pool's name goes.
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 {
			if err := unix.Unlinkat(fd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return removed, fmt.Errorf("snapshot: sweep object pool: %w", err)
			}
			removed++
		}
	}
	return removed, nil
}

// DiskUsage is the disk space the store's layers and pool objects take:
// the allocated blocks of each distinct inode (at least 512 bytes each),
// so a file many layers share counts once. The pool's own directories and
// temporary layers are left out.
func (s *Store) DiskUsage() int64 {
	seen := map[inode]bool{}
	var n int64
	add := func(info fs.FileInfo) {
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return
		}
		if !info.IsDir() && st.Nlink > 1 {
			id := inode{st.Dev, st.Ino}
			if seen[id] {
				return
			}
			seen[id] = true
		}
		n += max(st.Blocks*512, 512)
	}
	walk := func(root string, dirs bool) {
		_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == root || (e.IsDir() && !dirs) {
				return nil
			}
			if info, err := e.Info(); err == nil {
				add(info)
			}
			return nil
		})
	}
	walk(s.layersDir(), true)
	walk(s.objectsDir(), false)
	return n
}

// CheckPool re-hashes every pool object and returns the names of those
// whose content or metadata no longer matches the key they are stored
// under. It reads every byte in the pool.
func (s *Store) CheckPool(ctx context.Context) ([]string, error) {
	dirs, err := os.ReadDir(s.objectsDir())
	if err != nil {
		return nil, fmt.Errorf("snapshot: read object pool: %w", err)
	}
	var bad []string
	for _, d := range dirs {
		names, err := os.ReadDir(filepath.Join(s.objectsDir(), d.Name()))
		if err != nil {
			return bad, fmt.Errorf("snapshot: read object pool: %w", err)
		}
		for _, e := range names {
			if err := ctx.Err(); err != nil {
				return bad, err
			}
			name := d.Name() + e.Name()
			key, _, _ := strings.Cut(name, ".")
			if got, err := objectKeyOf(filepath.Join(s.objectsDir(), d.Name(), e.Name())); err != nil || got != key {
				bad = append(bad, name)
			}
		}
	}
	return bad, nil
}

// objectKeyOf computes the key of the file at p from its content and
// inode, as Commit does.
func objectKeyOf(p string) (string, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", fmt.Errorf("snapshot: pool object %s is not a regular file", filepath.Base(p))
	}
	recs, err := xattrs(fd)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	hdr := &tar.Header{
		Mode: int64(st.Mode & 0o7777), Uid: int(st.Uid), Gid: int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()), Size: st.Size, PAXRecords: recs,
	}
	return objectKey(h.Sum(nil), hdr), nil
}
