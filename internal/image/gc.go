package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Remove deletes the record of the image ref names (a builtin name, an
// imported image's digest or source). Its layers stay until GC, which
// leaves the ones other images share. The caller checks that nothing uses
// the image first. It returns the removed image.
func (s *Store) Remove(ctx context.Context, ref string) (*Image, error) {
	img, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	removed := false
	if len(img.Digest) > len(digestPrefix) {
		p := filepath.Join(s.importedDir(), img.Digest[len(digestPrefix):]+".json")
		if err := os.Remove(p); err == nil {
			removed = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing image %s: %w", img.Digest, err)
		}
	}
	for _, name := range Builtin() {
		if rf, err := s.readRef(name); err == nil && rf.Digest == img.Digest {
			if err := os.Remove(filepath.Join(s.refsDir(), name+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("removing image %s: %w", name, err)
			}
			removed = true
		}
	}
	if !removed {
		return nil, errdefs.NotFound("image %q has no record to remove", printable(ref))
	}
	s.log.Info("image removed", "digest", img.Digest, "name", img.Name)
	return img, nil
}

// GCResult says what a collection freed.
type GCResult struct {
	RemovedLayers []string
	FreedBytes    int64
}

// GC deletes every layer that no image record references and that is not
// among the layers of the images in keep (digests of images that sandboxes
// or snapshots still use, whether or not a record names them). It holds the
// store's build lock exclusively, so no build or import is half-recorded
// while it decides.
func (s *Store) GC(ctx context.Context, keep []string) (GCResult, error) {
	var res GCResult
	unlock, err := flockWait(ctx, filepath.Join(s.dir, "builds.lock"), true)
	if err != nil {
		return res, err
	}
	defer unlock()
	live := make(map[string]bool)
	for _, name := range Builtin() {
		if rf, err := s.readRef(name); err == nil {
			live[rf.Digest[len(digestPrefix):]] = true
		}
	}
	recs, err := s.listImportedRecords()
	if err != nil {
		return res, fmt.Errorf("image gc: %w", err)
	}
	for _, r := range recs {
		for _, l := range r.Layers {
			live[l[len(digestPrefix):]] = true
		}
	}
	for _, d := range keep {
		if !validDigest(d) {
			continue
		}
		h := d[len(digestPrefix):]
		live[h] = true // a builtin image's digest is its layer's
		if r, err := s.readImported(h); err == nil {
			for _, l := range r.Layers {
				live[l[len(digestPrefix):]] = true
			}
		}
	}
	ents, err := os.ReadDir(s.layersDir())
	if err != nil {
		return res, fmt.Errorf("image gc: %w", err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if !validHex(e.Name()) || live[e.Name()] {
			continue
		}
		dir := filepath.Join(s.layersDir(), e.Name())
		size := treeSize(dir)
		// Rename first so a crash mid-delete leaves debris in tmp/ (cleared
		// at start) rather than a half layer under its digest.
		doomed := filepath.Join(s.tmpDir(), "gc-"+e.Name())
		if err := os.Rename(dir, doomed); err != nil {
			return res, fmt.Errorf("image gc: %w", err)
		}
		if err := removeTree(doomed); err != nil {
			return res, fmt.Errorf("image gc: %w", err)
		}
		res.RemovedLayers = append(res.RemovedLayers, digestPrefix+e.Name())
		res.FreedBytes += size
	}
	s.log.Info("image gc", "removed_layers", len(res.RemovedLayers), "freed_bytes", res.FreedBytes)
	return res, nil
}

func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
