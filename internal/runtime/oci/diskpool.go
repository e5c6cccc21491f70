package oci

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Formatting a disk image is the largest step of a sandbox's start that
// Paddock itself adds (tens of milliseconds of mkfs.ext4 on a loaded
// host), and it needs nothing from the sandbox but the size. diskPool keeps
// a few freshly formatted images of the sizes recently asked for, made in
// the background, so a start only has to rename one into place.
//
// Guarantees:
//   - An image in the pool was never mounted: it is made by mkfs into a
//     temporary name, synced, and only then renamed to its ready name, so
//     a crash leaves either a complete, unused image or a temporary file
//     that the next start deletes.
//   - An image goes to at most one sandbox: take moves it with rename(2)
//     under the pool's lock; a second taker finds nothing to move.
//   - The disk cap holds: an image is only taken for the exact size in its
//     name, and its length is checked again after the move.
const (
	diskPoolDir        = "disks"
	maxDiskPoolPerSize = 8
	diskPoolSizes      = 3 // sizes kept ready at once: the most recent ones
	diskTmpPrefix      = ".tmp-"
	diskReadySuffix    = ".img"
)

type diskPool struct {
	dir     string
	perSize int // images kept ready for each size
	log     *slog.Logger
	// mkfs formats path as a disk image of size bytes (createDisk; tests
	// may count calls).
	mkfs func(ctx context.Context, path string, size int64) error

	mu      sync.Mutex
	ready   map[int64][]string // size -> ready image paths
	recent  []int64            // wanted sizes, most recent last
	filling bool
	closed  bool
	idle    sync.WaitGroup // the filler, when one runs
}

func newDiskPool(dir string, perSize int, log *slog.Logger) (*diskPool, error) {
	p := &diskPool{dir: dir, log: log, perSize: perSize, ready: map[int64][]string{},
		mkfs: func(ctx context.Context, path string, size int64) error {
			return formatDisk(ctx, path, size, true)
		}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("oci: create disk pool dir: %w", err)
	}
	if err := p.reconcile(); err != nil {
		return nil, err
	}
	return p, nil
}

// reconcile is the pool's state after a (possibly unclean) stop: complete
// images are kept for reuse; half-made ones and anything else are removed.
func (p *diskPool) reconcile() error {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("oci: read disk pool: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(p.dir, e.Name())
		size, ok := parseDiskName(e.Name())
		if ok && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil && fi.Size() == size {
				p.ready[size] = append(p.ready[size], path)
				p.want(size)
				continue
			}
		}
		p.log.Debug("disk pool: removing leftover", "file", e.Name())
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("oci: clean disk pool: %w", err)
		}
	}
	return nil
}

// parseDiskName reads "<size>.<random>.img", the name of a ready image.
func parseDiskName(name string) (int64, bool) {
	rest, ok := strings.CutSuffix(name, diskReadySuffix)
	if !ok || strings.HasPrefix(name, ".") {
		return 0, false
	}
	sizeStr, tag, ok := strings.Cut(rest, ".")
	if !ok || len(tag) != 16 {
		return 0, false
	}
	if _, err := hex.DecodeString(tag); err != nil {
		return 0, false
	}
	size, err := strconv.ParseInt(sizeStr, 10, 64)
	if err != nil || size < minDiskBytes || size > maxDiskBytes || strconv.FormatInt(size, 10) != sizeStr {
		return 0, false
	}
	return size, true
}

// want records that size was asked for, keeping the most recent sizes.
// The caller holds mu.
func (p *diskPool) want(size int64) {
	for i, s := range p.recent {
		if s == size {
			p.recent = append(p.recent[:i], p.recent[i+1:]...)
			break
		}
	}
	p.recent = append(p.recent, size)
	for len(p.recent) > diskPoolSizes {
		old := p.recent[0]
		p.recent = p.recent[1:]
		for _, path := range p.ready[old] {
			_ = os.Remove(path)
		}
		delete(p.ready, old)
	}
}

// take moves a ready image of exactly size bytes to dst, which must not
// exist. It reports false when none was ready (the caller formats one) and
// starts making more either way.
func (p *diskPool) take(dst string, size int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want(size)
	defer p.refillLocked()
	for len(p.ready[size]) > 0 {
		imgs := p.ready[size]
		src := imgs[len(imgs)-1]
		p.ready[size] = imgs[:len(imgs)-1]
		// RENAME_NOREPLACE: never overwrite a disk that holds files.
		if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE); err != nil {
			if errors.Is(err, fs.ErrExist) {
				p.ready[size] = append(p.ready[size], src) // still unused
				return false
			}
			p.log.Warn("disk pool: take image", "err", err)
			_ = os.Remove(src)
			continue
		}
		if fi, err := os.Lstat(dst); err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
			_ = os.Remove(dst)
			continue
		}
		return true
	}
	return false
}

// refillLocked starts the filler unless it runs. The caller holds mu.
func (p *diskPool) refillLocked() {
	if p.filling || p.closed || p.missingLocked() == 0 {
		return
	}
	p.filling = true
	p.idle.Add(1)
	go p.fill()
}

// missingLocked returns the first wanted size short of images, or 0.
func (p *diskPool) missingLocked() int64 {
	for i := len(p.recent) - 1; i >= 0; i-- {
		if s := p.recent[i]; len(p.ready[s]) < p.perSize {
			return s
		}
	}
	return 0
}

// fill makes images until every wanted size has its share.
func (p *diskPool) fill() {
	defer p.idle.Done()
	for {
		p.mu.Lock()
		size := p.missingLocked()
		if size == 0 || p.closed {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		path, err := p.make(size)
		p.mu.Lock()
		switch {
		case err != nil:
			p.filling = false
			p.mu.Unlock()
			p.log.Warn("disk pool: make image; starts format their own", "err", err)
			return
		case p.closed || !p.wantedLocked(size):
			_ = os.Remove(path)
		default:
			p.ready[size] = append(p.ready[size], path)
		}
		p.mu.Unlock()
	}
}

func (p *diskPool) wantedLocked(size int64) bool {
	for _, s := range p.recent {
		if s == size {
			return true
		}
	}
	return false
}

// make formats one image under a temporary name and publishes it only once
// it is complete and on disk.
func (p *diskPool) make(size int64) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tag := hex.EncodeToString(b[:])
	tmp := filepath.Join(p.dir, diskTmpPrefix+tag)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.mkfs(ctx, tmp, size); err != nil {
		return "", err
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	path := filepath.Join(p.dir, strconv.FormatInt(size, 10)+"."+tag+diskReadySuffix)
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("oci: publish disk image: %w", err)
	}
	return path, syncFile(p.dir)
}

// close stops making images and waits for the one being made.
func (p *diskPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.idle.Wait()
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("oci: sync %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("oci: sync %s: %w", filepath.Base(path), err)
	}
	return nil
}

// openDiskPool sets up the pool of n images per size (none when n is 0),
// keeping the complete images a previous run left.
func (r *Runtime) openDiskPool(n int) error {
	if n == 0 {
		return nil
	}
	if n < 0 || n > maxDiskPoolPerSize {
		return errdefs.Invalid("oci: disk pool of %d images per size: want 0 to %d", n, maxDiskPoolPerSize)
	}
	p, err := newDiskPool(filepath.Join(r.root, diskPoolDir), n, r.log.With("part", "diskpool"))
	if err != nil {
		return err
	}
	r.disks = p
	return nil
}

// newDisk puts a formatted image of size bytes at path, from the pool when
// it has one.
func (r *Runtime) newDisk(ctx context.Context, path string, size int64) error {
	if r.disks != nil && r.disks.take(path, size) {
		return nil
	}
	return createDisk(ctx, path, size)
}

// Close stops making pooled disk images and drops runsc's pinned network
// namespace (runsc_netns.go). Sandboxes keep running.
func (r *Runtime) Close() error {
	if r.disks != nil {
		r.disks.close()
	}
	r.unpinNullNetNS()
	r.usernsMu.Lock()
	for base, f := range r.usernsCache {
		f.Close()
		delete(r.usernsCache, base)
	}
	r.usernsMu.Unlock()
	return nil
}
