package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// DefaultMaxOwnerBytes is the default cap on the bytes one caller's
// imported and pulled images may have written to disk.
const DefaultMaxOwnerBytes = 32 << 30

// ImportOptions says who imports or pulls an image and what it may write.
type ImportOptions struct {
	// Source names the image (a file name, tag or reference); "" on an
	// import takes the tag inside the archive, if any.
	Source string
	// MaxArchive bounds the archive an import reads (default
	// DefaultMaxArchive).
	MaxArchive int64
	// Owner is recorded as the importer: the API key id, or the local
	// caller. It may delete what it imported with a key of scope own.
	Owner string
	// MaxOwnerBytes caps the bytes Owner's images have written to disk,
	// this import included; 0 means no cap.
	MaxOwnerBytes int64
	Progress      Progress
	// Auth, on a pull, is the registry's credentials for this pull alone
	// (offered to the registry named by the reference only, and kept
	// nowhere); nil pulls anonymously.
	Auth *RegistryAuth
}

// RegistryAuth is a user name and password for a registry's basic or
// token login.
type RegistryAuth struct {
	Username, Password string
}

// OwnerUsage is the bytes the images owner imported or pulled wrote to
// disk (their layers that were new to the store when they came).
func (s *Store) OwnerUsage(owner string) (int64, error) {
	recs, err := s.listImportedRecords()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range recs {
		if owner != "" && r.Owner == owner {
			n += r.Charged
		}
	}
	return n, nil
}

// lockOwner lets one import or pull of owner's run at a time in this
// process, so the usage it starts from stays true while it writes.
func (s *Store) lockOwner(ctx context.Context, owner string) (func(), error) {
	for {
		s.mu.Lock()
		busy, ok := s.importing[owner]
		if !ok {
			done := make(chan struct{})
			s.importing[owner] = done
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.importing, owner)
				s.mu.Unlock()
				close(done)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for another import of the same caller: %w", ctx.Err())
		}
	}
}

// importBudget counts what one import writes against its owner's cap.
type importBudget struct {
	owner   string
	used    int64 // by the owner's images before this import
	limit   int64 // 0: none
	charged int64
}

// ownerImport starts an import for opts.Owner: it waits for the owner's
// earlier import to end and returns the owner's budget and the unlock.
func (s *Store) ownerImport(ctx context.Context, opts ImportOptions) (*importBudget, func(), error) {
	unlock, err := s.lockOwner(ctx, opts.Owner)
	if err != nil {
		return nil, nil, err
	}
	budget, err := s.newBudget(opts.Owner, opts.MaxOwnerBytes)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return budget, unlock, nil
}

// newBudget starts the budget of an import by owner, refusing it at once
// when the owner's images already fill the cap.
func (s *Store) newBudget(owner string, limit int64) (*importBudget, error) {
	b := &importBudget{owner: owner, limit: limit}
	if limit <= 0 {
		return b, nil
	}
	used, err := s.OwnerUsage(owner)
	if err != nil {
		return nil, err
	}
	b.used = used
	if used >= limit {
		return nil, b.exhausted(0)
	}
	return b, nil
}

// remaining is what the import may still write; -1 without a cap.
func (b *importBudget) remaining() int64 {
	if b.limit <= 0 {
		return -1
	}
	return max(b.limit-b.used-b.charged, 0)
}

// Charge takes n bytes the import is about to write, or refuses them.
func (b *importBudget) Charge(n int64) error {
	if b.limit > 0 && b.used+b.charged+n > b.limit {
		return b.exhausted(n)
	}
	b.charged += n
	return nil
}

func (b *importBudget) exhausted(n int64) error {
	return fmt.Errorf("image import refused: the images %s imported hold %d bytes on disk, this import wrote %d and needs %d more, and the limit per caller is %d (PADDOCK_IMAGE_IMPORT_MAX_PER_KEY); delete images it imported to make room: %w",
		ownerName(b.owner), b.used, b.charged, n, b.limit, errdefs.ErrResourceExhausted)
}

func ownerName(owner string) string {
	if owner == "" || owner == api.CallerLocal {
		return "the unix socket's caller"
	}
	return "API key " + owner
}

// holdLayers marks layers an import or pull in this process is storing or
// using, so another one's cleanup leaves them; release undoes it.
func (s *Store) holdLayers(hexes ...string) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.layerHolds == nil {
		s.layerHolds = make(map[string]int)
	}
	for _, h := range hexes {
		s.layerHolds[h]++
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, h := range hexes {
			if s.layerHolds[h]--; s.layerHolds[h] <= 0 {
				delete(s.layerHolds, h)
			}
		}
	}
}

// dropLayers removes the layers a failed import stored, unless an image
// record or another import under way names them: an import that fails
// (on its cap, a damaged layer, anything) leaves nothing that no one is
// charged for. The caller holds its own holds on them.
func (s *Store) dropLayers(hexes []string) {
	if len(hexes) == 0 {
		return
	}
	live := make(map[string]bool)
	if recs, err := s.listImportedRecords(); err == nil {
		for _, r := range recs {
			for _, l := range r.Layers {
				live[l[len(digestPrefix):]] = true
			}
		}
	} else {
		s.log.Warn("keeping the layers of a failed import", "err", err)
		return
	}
	for _, name := range Builtin() {
		if rf, err := s.readRef(name); err == nil {
			live[rf.Digest[len(digestPrefix):]] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range hexes {
		if live[h] || s.layerHolds[h] > 1 {
			continue
		}
		dir := filepath.Dir(s.layerPath(digestPrefix + h))
		doomed := filepath.Join(s.tmpDir(), "drop-"+h)
		if err := os.Rename(dir, doomed); err != nil {
			s.log.Warn("removing a layer of a failed import", "layer", h, "err", err)
			continue
		}
		if err := removeTree(doomed); err != nil {
			s.log.Warn("removing a layer of a failed import", "layer", h, "err", err)
		}
	}
}
