package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// ErrLayerHeld is returned for a layer that cannot be removed because a
// lease holds it. It is also an errdefs.ErrConflict.
var ErrLayerHeld = fmt.Errorf("snapshot layer is held by a restore: %w", errdefs.ErrConflict)

// leases is the store's record of held layers and running collections.
type leases struct {
	mu    sync.Mutex
	holds map[string]int
	// passes are the collections under way; each remembers every layer
	// held at any moment since it began.
	passes map[*Collection]struct{}
	// dirty says pool objects may have lost their last layer.
	dirty bool
}

// Hold leases stored layers: until release is called, neither RemoveLayer
// nor a collection removes them (nor, since their files link them, their
// pool objects). It fails, holding nothing, if any layer is not on disk.
// release may be called more than once.
func (s *Store) Hold(digests ...string) (release func(), err error) {
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	for _, d := range digests {
		if _, err := s.LayerPath(d); err != nil {
			return nil, err
		}
	}
	for _, d := range digests {
		s.lease.holds[d]++
		for g := range s.lease.passes {
			g.touched[d] = true
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.lease.mu.Lock()
			defer s.lease.mu.Unlock()
			for _, d := range digests {
				if s.lease.holds[d]--; s.lease.holds[d] <= 0 {
					delete(s.lease.holds, d)
				}
			}
		})
	}, nil
}

// RemoveLayer deletes a layer the caller knows nothing names, and then
// the pool objects only it linked. A held layer is ErrLayerHeld.
func (s *Store) RemoveLayer(digest string) error {
	if err := s.removeLayer(digest, nil); err != nil {
		return err
	}
	_, err := s.sweep()
	return err
}

// removeLayer deletes a layer unless a lease holds it, or held it at any
// moment of collection g.
func (s *Store) removeLayer(digest string, g *Collection) error {
	if !ValidDigest(digest) {
		return errdefs.Invalid("invalid layer digest %q", truncate(digest, 80))
	}
	hex := strings.TrimPrefix(digest, "sha256:")
	p := filepath.Join(s.layersDir(), hex)
	// Renamed out first, so a half-deleted layer is never visible as one.
	tmp := filepath.Join(s.tmpDir(), "rm-"+hex[:16])
	s.lease.mu.Lock()
	if s.lease.holds[digest] > 0 || (g != nil && g.touched[digest]) {
		s.lease.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrLayerHeld, digest)
	}
	err := os.Rename(p, tmp)
	if err == nil {
		s.lease.dirty = true
	}
	s.lease.mu.Unlock()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("snapshot: remove layer: %w", err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("snapshot: remove layer: %w", err)
	}
	return nil
}

// sweep removes garbage pool objects if a layer went since the last sweep.
func (s *Store) sweep() (int, error) {
	s.lease.mu.Lock()
	dirty := s.lease.dirty
	s.lease.dirty = false
	s.lease.mu.Unlock()
	if !dirty {
		return 0, nil
	}
	n, err := s.sweepObjects()
	if err != nil {
		s.lease.mu.Lock()
		s.lease.dirty = true
		s.lease.mu.Unlock()
	}
	return n, err
}

// Collection is one pass of the collector of unused layers. Begin it
// before reading what uses layers (snapshot and sandbox records): a layer
// held at any moment after that is kept, even if its lease ended before
// the pass removes anything, because the record that names it may have
// been written after the caller looked.
type Collection struct {
	s       *Store
	touched map[string]bool
}

// BeginCollection starts a collection; End it when done.
func (s *Store) BeginCollection() *Collection {
	g := &Collection{s: s, touched: map[string]bool{}}
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	for d := range s.lease.holds {
		g.touched[d] = true
	}
	s.lease.passes[g] = struct{}{}
	return g
}

// End finishes the collection.
func (g *Collection) End() {
	g.s.lease.mu.Lock()
	defer g.s.lease.mu.Unlock()
	delete(g.s.lease.passes, g)
}

// Collected is what a collection removed.
type Collected struct {
	Layers  []string // digests removed
	Held    []string // unused but held by a restore, kept
	Objects int      // pool objects removed
}

// RemoveUnused removes every stored layer not in used and not held, then
// every pool object no layer links any more. It goes on past a layer it
// cannot remove and returns the first error.
func (g *Collection) RemoveUnused(used map[string]bool) (Collected, error) {
	var out Collected
	stored, err := g.s.Layers()
	if err != nil {
		return out, err
	}
	var first error
	for _, d := range stored {
		if used[d] {
			continue
		}
		switch err := g.s.removeLayer(d, g); {
		case errors.Is(err, ErrLayerHeld):
			out.Held = append(out.Held, d)
		case err != nil:
			if first == nil {
				first = fmt.Errorf("layer %s: %w", d, err)
			}
		default:
			out.Layers = append(out.Layers, d)
		}
	}
	n, err := g.s.sweep()
	out.Objects = n
	if first == nil {
		first = err
	}
	return out, first
}
