package snapshot

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// A layer's seal is a digest of its metadata: every entry's name, type,
// mode, owner, modification time, size, symlink target and kept extended
// attributes, in the canonical order, but not file content. Commit
// records it on the layer's top directory; CheckLayer recomputes it. That
// costs a stat and an open per entry instead of reading every byte, and
// catches a layer that lost, gained, truncated, grew or re-owned a file on
// disk. Content changed in place at the same size is caught only by
// VerifyLayer, which export runs.
//
// The seal lives in a trusted.* attribute of the layer's top directory:
// WriteTree never emits the top directory, and a sandbox sees its own
// writable layer's top directory there, never a lower layer's.
const sealXattr = "trusted.paddock.seal"

const sealVersion = "v1:"

// sealEntry adds one entry's metadata to a seal.
func sealEntry(h hash.Hash, hdr *tar.Header) {
	b := make([]byte, 0, 128)
	b = appendField(b, hdr.Name)
	b = append(b, hdr.Typeflag)
	b = binary.AppendUvarint(b, uint64(hdr.Mode))
	b = binary.AppendUvarint(b, uint64(hdr.Uid))
	b = binary.AppendUvarint(b, uint64(hdr.Gid))
	b = binary.AppendVarint(b, hdr.ModTime.UnixNano())
	b = binary.AppendUvarint(b, uint64(hdr.Size))
	b = appendField(b, hdr.Linkname)
	b = appendRecords(b, hdr.PAXRecords)
	h.Write(b)
}

func sealValue(h hash.Hash) string { return sealVersion + hex.EncodeToString(h.Sum(nil)) }

// commitWalk walks a temporary layer once: its canonical digest and size,
// its seal, and (with dd) its files linked into the pool.
func commitWalk(ctx context.Context, dir string, dd *deduper) (Layer, string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Layer{}, "", fmt.Errorf("snapshot: open layer: %w", err)
	}
	defer unix.Close(fd)
	h := sha256.New()
	cw := &countWriter{w: h}
	seal := sha256.New()
	t := &treeWriter{ctx: ctx, tw: tar.NewWriter(cw), seal: seal, dd: dd}
	if err := t.run(fd, dir); err != nil {
		return Layer{}, "", err
	}
	return Layer{Digest: digestOf(h), Size: cw.n}, sealValue(seal), nil
}

// sealTree computes dir's seal without reading file content.
func sealTree(ctx context.Context, dir string) (string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("snapshot: open layer: %w", err)
	}
	defer unix.Close(fd)
	seal := sha256.New()
	t := &treeWriter{ctx: ctx, seal: seal, metaOnly: true}
	if err := t.run(fd, dir); err != nil {
		return "", err
	}
	return sealValue(seal), nil
}

// writeSeal records a seal on a layer directory. A filesystem or a
// process that cannot hold trusted.* attributes leaves the layer unsealed,
// and CheckLayer then checks only that it is there.
func writeSeal(dir, seal string) (bool, error) {
	err := unix.Lsetxattr(dir, sealXattr, []byte(seal), 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTSUP):
		return false, nil
	default:
		return false, fmt.Errorf("snapshot: seal layer: %w", err)
	}
}

func readSeal(dir string) (string, error) {
	buf := make([]byte, 128)
	n, err := unix.Lgetxattr(dir, sealXattr, buf)
	switch {
	case err == nil:
		return string(buf[:n]), nil
	case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EPERM):
		return "", nil
	default:
		return "", fmt.Errorf("snapshot: read layer seal: %w", err)
	}
}

// CheckLayer checks cheaply that a stored layer is whole: it is on disk
// and its metadata matches the seal Commit recorded (see sealEntry). A
// layer stored before seals existed is sealed now, as it is. A damaged
// layer is ErrFailedPrecondition with a message that says so.
func (s *Store) CheckLayer(ctx context.Context, digest string) error {
	p, err := s.LayerPath(digest)
	if err != nil {
		return err
	}
	want, err := readSeal(p)
	if err != nil {
		return err
	}
	got, err := sealTree(ctx, p)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errdefs.ErrConflict) {
		return fmt.Errorf("snapshot layer %s is damaged on disk: %v: %w", digest, err, errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		return err
	}
	if want == "" {
		if ok, err := writeSeal(p, got); err != nil {
			return err
		} else if ok {
			s.log.Info("sealed a layer stored before layers were sealed", "layer", digest)
		}
		return nil
	}
	if got != want {
		return fmt.Errorf("snapshot layer %s was changed on disk: its files no longer have the names, sizes, owners, modes and times it was stored with: %w", digest, errdefs.ErrFailedPrecondition)
	}
	return nil
}
