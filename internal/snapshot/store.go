package snapshot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// Options configure a Store.
type Options struct {
	// Dir is the store's directory (created 0700).
	Dir    string
	Logger *slog.Logger
	// MinLinkSize is the smallest file shared through the object pool;
	// smaller ones are copied into each layer. 0 means
	// DefaultMinLinkSize; negative turns the pool off.
	MinLinkSize int64
}

// Store keeps layer directories under <Dir>/layers/<hex>, named by the
// sha256 of their canonical tar encoding, so equal layers are stored once,
// and their larger files once more in the object pool (pool.go), so equal
// files are stored once across layers. A layer appears by one rename of a
// complete directory from <Dir>/tmp, so a crash leaves a layer either
// whole or absent; tmp is emptied on Open.
type Store struct {
	dir     string
	log     *slog.Logger
	minLink int64
	lease   leases
}

var digestRE = lazyre.New(`^sha256:[0-9a-f]{64}$`)

// ValidDigest reports whether d is "sha256:" and 64 lowercase hex digits.
func ValidDigest(d string) bool { return digestRE.MatchString(d) }

// Open creates the store's directories and removes leftovers of
// interrupted snapshots.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" || !filepath.IsAbs(opts.Dir) {
		return nil, errdefs.Invalid("snapshot: store directory must be an absolute path")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: filepath.Clean(opts.Dir), log: log, minLink: opts.MinLinkSize}
	switch {
	case s.minLink == 0:
		s.minLink = DefaultMinLinkSize
	case s.minLink < 0:
		s.minLink = 1 << 62
	}
	// The first collection sweeps the pool: a crash may have left objects
	// whose layers are gone.
	s.lease = leases{holds: map[string]int{}, passes: map[*Collection]struct{}{}, dirty: true}
	for _, d := range []string{s.dir, s.layersDir(), s.tmpDir(), s.objectsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("snapshot: create store: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("snapshot: create store: %w", err)
		}
	}
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return nil, fmt.Errorf("snapshot: read store: %w", err)
	}
	for _, e := range entries {
		log.Info("removing an interrupted snapshot's partial layer", "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(s.tmpDir(), e.Name())); err != nil {
			return nil, fmt.Errorf("snapshot: clean store: %w", err)
		}
	}
	return s, nil
}

func (s *Store) layersDir() string { return filepath.Join(s.dir, "layers") }
func (s *Store) tmpDir() string    { return filepath.Join(s.dir, "tmp") }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// LayerPath returns the directory of a stored layer. A layer missing from
// disk is ErrFailedPrecondition with a message that says so.
func (s *Store) LayerPath(digest string) (string, error) {
	if !ValidDigest(digest) {
		return "", errdefs.Invalid("invalid layer digest %q", truncate(digest, 80))
	}
	p := filepath.Join(s.layersDir(), strings.TrimPrefix(digest, "sha256:"))
	st, err := os.Lstat(p)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("snapshot layer %s is missing from disk: %w", digest, errdefs.ErrFailedPrecondition)
	}
	return p, nil
}

// HasLayer reports whether the layer is on disk.
func (s *Store) HasLayer(digest string) bool {
	_, err := s.LayerPath(digest)
	return err == nil
}

// Temp returns a new empty directory to build a layer in; Commit or
// Discard it.
func (s *Store) Temp() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	p := filepath.Join(s.tmpDir(), hex.EncodeToString(b))
	if err := os.Mkdir(p, 0o755); err != nil {
		return "", fmt.Errorf("snapshot: create temporary layer: %w", err)
	}
	return p, nil
}

// Discard removes a temporary layer directory.
func (s *Store) Discard(tmp string) {
	if !s.inTmp(tmp) {
		return
	}
	if err := os.RemoveAll(tmp); err != nil {
		s.log.Warn("remove temporary layer", "err", err)
	}
}

func (s *Store) inTmp(p string) bool {
	return filepath.Dir(filepath.Clean(p)) == s.tmpDir()
}

// Layer is a committed layer.
type Layer struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"` // bytes of its canonical tar encoding
	// Added is the disk space committing or importing it added to the
	// store: its inodes that were not stored already (0 when the whole
	// layer was). It is not part of the export format.
	Added int64 `json:"-"`
}

// Commit digests the temporary layer and moves it into place. If the same
// layer is stored already, the temporary one is removed and the stored one
// is used: layers are deduplicated by content, and so are their files
// (pool.go).
func (s *Store) Commit(ctx context.Context, tmp string) (Layer, error) {
	return s.CommitOn(ctx, tmp, nil)
}

// CommitOn is Commit for a layer that will be stacked on the stored
// layers below: none of its files shares an inode with theirs, so no two
// paths a sandbox sees are one file.
func (s *Store) CommitOn(ctx context.Context, tmp string, below []string) (Layer, error) {
	if !s.inTmp(tmp) {
		return Layer{}, errdefs.Invalid("snapshot: %s is not a temporary layer", filepath.Base(tmp))
	}
	dd := &deduper{s: s, min: s.minLink, taken: s.chainInodes(below)}
	l, seal, err := commitWalk(ctx, tmp, dd)
	if err != nil {
		s.Discard(tmp)
		return Layer{}, err
	}
	dst := filepath.Join(s.layersDir(), strings.TrimPrefix(l.Digest, "sha256:"))
	if s.HasLayer(l.Digest) {
		s.Discard(tmp)
		return l, nil
	}
	if _, err := writeSeal(tmp, seal); err != nil {
		s.Discard(tmp)
		return Layer{}, err
	}
	// One flush makes the layer's files durable before the pool names
	// them, and the directory's fsync makes the rename durable before a
	// record names the layer.
	if err := syncTree(tmp); err != nil {
		s.Discard(tmp)
		return Layer{}, err
	}
	dd.publish(tmp)
	if err := os.Rename(tmp, dst); err != nil {
		s.Discard(tmp)
		s.lease.mu.Lock()
		s.lease.dirty = true // objects published for it may be garbage now
		s.lease.mu.Unlock()
		if s.HasLayer(l.Digest) {
			return l, nil
		}
		return Layer{}, fmt.Errorf("snapshot: store layer: %w", err)
	}
	if err := syncDir(s.layersDir()); err != nil {
		return Layer{}, err
	}
	l.Added = dd.added
	s.log.Debug("layer stored", "layer", l.Digest, "size", l.Size, "added", l.Added, "linked", dd.linked)
	return l, nil
}

// digestTree returns the digest and size of dir's canonical tar encoding.
func digestTree(ctx context.Context, dir string) (Layer, error) {
	h := sha256.New()
	cw := &countWriter{w: h}
	if err := WriteTree(ctx, dir, cw, TreeOptions{}); err != nil {
		return Layer{}, err
	}
	return Layer{Digest: digestOf(h), Size: cw.n}, nil
}

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteLayer writes a stored layer's canonical tar stream to w.
func (s *Store) WriteLayer(ctx context.Context, digest string, w io.Writer) error {
	p, err := s.LayerPath(digest)
	if err != nil {
		return err
	}
	return WriteTree(ctx, p, w, TreeOptions{})
}

// VerifyLayer recomputes a stored layer's digest; a layer changed or
// damaged on disk is ErrFailedPrecondition.
func (s *Store) VerifyLayer(ctx context.Context, digest string) (Layer, error) {
	p, err := s.LayerPath(digest)
	if err != nil {
		return Layer{}, err
	}
	l, err := digestTree(ctx, p)
	if err != nil {
		return Layer{}, err
	}
	if l.Digest != digest {
		return Layer{}, fmt.Errorf("snapshot layer %s was changed on disk (it now hashes to %s): %w", digest, l.Digest, errdefs.ErrFailedPrecondition)
	}
	return l, nil
}

// Layers lists the digests of the stored layers.
func (s *Store) Layers() ([]string, error) {
	entries, err := os.ReadDir(s.layersDir())
	if err != nil {
		return nil, fmt.Errorf("snapshot: list layers: %w", err)
	}
	var out []string
	for _, e := range entries {
		if d := "sha256:" + e.Name(); ValidDigest(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

func syncDir(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("snapshot: sync: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("snapshot: sync: %w", err)
	}
	return nil
}

// syncTree flushes the filesystem holding dir: one syncfs instead of an
// fsync per file.
func syncTree(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("snapshot: sync: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("snapshot: sync: %w", err)
	}
	return nil
}

// CopyTree copies the overlay-format directory src into dst (empty),
// keeping owners, modes, times, kept xattrs and whiteouts. src may be
// controlled by a sandbox: it is read with WriteTree's rules and written
// with Extract's, so nothing is followed or created outside dst.
func CopyTree(ctx context.Context, src, dst string, opts TreeOptions) error {
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := WriteTree(ctx, src, pw, opts)
		pw.CloseWithError(err)
		errc <- err
	}()
	xerr := Extract(ctx, pr, dst, Limits{MaxEntries: 1 << 24, MaxBytes: 1 << 50})
	pr.CloseWithError(errors.New("extract ended"))
	werr := <-errc
	if xerr != nil {
		return xerr
	}
	return werr
}
