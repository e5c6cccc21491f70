package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/ledger"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store"
)

// snapState serialises committing layers and recording them against the
// collector of unused layers, so a layer is never removed between being
// stored and being named by a record.
type snapState struct {
	mu sync.Mutex
	// memHeld counts the creates restoring each snapshot's memory image;
	// memOrphaned names held images whose snapshot was deleted meanwhile
	// (memsnapshot.go).
	memHeld     map[string]int
	memOrphaned map[string]bool
}

func (c *Controller) snapStore() (*snapshot.Store, error) {
	if c.opts.Snapshots == nil {
		return nil, fmt.Errorf("snapshots are not enabled on this daemon: %w", errdefs.ErrFailedPrecondition)
	}
	return c.opts.Snapshots, nil
}

// CreateSnapshot takes a consistent snapshot of a running, paused or
// stopped sandbox's files.
func (c *Controller) CreateSnapshot(ctx context.Context, ref string, req api.CreateSnapshotRequest) (*api.Snapshot, error) {
	if err := c.validSnapshotName(ctx, req.Name); err != nil {
		return nil, err
	}
	ttl, err := parseTTL(req.TTL)
	if err != nil {
		return nil, err
	}
	rec, e, unlock, err := c.lockRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	c.touch(rec.ID)
	var snap *store.Snapshot
	if req.Memory {
		snap, err = c.memorySnapshotLocked(ctx, e, rec, req.Name, ttl, Caller(ctx)) // memsnapshot.go
	} else {
		snap, err = c.snapshotLocked(ctx, rec, req.Name, ttl, Caller(ctx))
	}
	id, name := rec.ID, rec.Name
	unlock()
	if err != nil {
		return nil, err
	}
	// However it was asked for (API, E2B, MCP), the sandbox's ledger
	// says a snapshot of it was taken.
	c.recordSnapshot(ctx, id, name, map[string]string{"snapshot": snap.ID, "name": snap.Name})
	return c.snapshotAPI(snap), nil
}

// recordSnapshot adds a snapshot entry to a sandbox's ledger, within the
// ledger's own deadline even when the caller has gone.
func (c *Controller) recordSnapshot(ctx context.Context, id, name string, data map[string]string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledger.Timeout)
	defer cancel()
	_ = c.record(ctx, id, name, api.LedgerEntry{Kind: api.LedgerSnapshot, Data: data})
}

// validSnapshotName checks a name for a snapshot ctx's caller is about to
// own: free among its own snapshots (other owners' names are theirs), and
// not the id of a snapshot it sees.
func (c *Controller) validSnapshotName(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	if err := validateName(name); err != nil {
		return err
	}
	if idRE.MatchString(name) {
		// A name that could be an id would make addressing ambiguous.
		if s, err := c.opts.Store.GetSnapshot(ctx, name); err == nil && visible(ctx, s.Owner) {
			return errSnapshotNameTaken(name)
		}
	}
	held, err := c.opts.Store.SnapshotsByName(ctx, name)
	if err != nil {
		return err
	}
	for _, s := range held {
		if s.Owner != Caller(ctx) {
			continue
		}
		if !c.expired(s) {
			return errSnapshotNameTaken(name)
		}
		// Expired, not collected yet: it is no longer listed, so its name
		// is free. Its layers go with the next collection.
		if err := c.opts.Store.DeleteSnapshot(context.WithoutCancel(ctx), s.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		c.log.Info("snapshot expired", "snapshot", s.ID, "name", s.Name, "expired_at", s.ExpiresAt)
	}
	return nil
}

// snapshotLocked copies rec's writable layer into the store and records a
// snapshot of it, owned by owner. A running sandbox is frozen for the copy
// and thawed after, whatever happened. The caller holds the sandbox's
// owner lock.
func (c *Controller) snapshotLocked(ctx context.Context, rec *store.Sandbox, name string, ttl time.Duration, owner string) (*store.Snapshot, error) {
	chain, top, err := c.captureLayer(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer c.snaps.mu.Unlock()
	snap := c.newSnapshotRecord(rec, name, ttl, owner, chain, top)
	if err := c.opts.Store.CreateSnapshot(context.WithoutCancel(ctx), snap); err != nil {
		if errors.Is(err, errdefs.ErrConflict) && name != "" {
			return nil, errSnapshotNameTaken(name)
		}
		return nil, err
	}
	c.log.Info("snapshot taken", "sandbox", rec.ID, "snapshot", snap.ID, "layer", top.Digest, "size", top.Size)
	return snap, nil
}

// newSnapshotRecord is the record of a snapshot of rec whose layers are
// chain, top the one just taken.
func (c *Controller) newSnapshotRecord(rec *store.Sandbox, name string, ttl time.Duration, owner string, chain []store.SnapshotLayer, top snapshot.Layer) *store.Snapshot {
	now := c.now()
	return &store.Snapshot{
		ID: newID(), Name: name, SandboxID: rec.ID, Image: rec.Image, ImageDigest: rec.ImageDigest,
		Parent: rec.SnapshotID, Layers: chain, Size: top.Size,
		CreatedAt: now, TTL: ttl, ExpiresAt: expiry(now, ttl), Owner: owner,
	}
}

// captureLayer copies rec's writable layer into the store and returns the
// full chain (rec's own snapshot layers, then the new one). On success it
// returns with c.snaps.mu held, so the caller records the layer before the
// collector can see it unused.
func (c *Controller) captureLayer(ctx context.Context, rec *store.Sandbox) ([]store.SnapshotLayer, snapshot.Layer, error) {
	ss, err := c.snapStore()
	if err != nil {
		return nil, snapshot.Layer{}, err
	}
	switch rec.State {
	case api.StateRunning, api.StatePaused, api.StateStopped, api.StateHibernated:
	default:
		return nil, snapshot.Layer{}, fmt.Errorf("sandbox %s is %s; snapshots are taken of running, paused or stopped sandboxes: %w", rec.ID, rec.State, errdefs.ErrConflict)
	}
	if len(rec.SnapshotLayers)+1 > snapshot.MaxChain {
		return nil, snapshot.Layer{}, fmt.Errorf("sandbox %s already stacks %d snapshot layers, the most a snapshot may hold is %d: %w", rec.ID, len(rec.SnapshotLayers), snapshot.MaxChain, errdefs.ErrFailedPrecondition)
	}
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return nil, snapshot.Layer{}, err
	}
	ls, ok := b.(runtime.LayerSnapshotter)
	if !ok {
		return nil, snapshot.Layer{}, fmt.Errorf("%s cannot snapshot a sandbox: %w", c.runtimeDesc(rec.Runtime), errdefs.ErrFailedPrecondition)
	}
	if err := c.checkStoreRoom(0); err != nil { // quota.go
		return nil, snapshot.Layer{}, err
	}
	tmp, err := ss.Temp()
	if err != nil {
		return nil, snapshot.Layer{}, snapErr(err)
	}
	// The copy is not abandoned half-way when the caller goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute)
	defer cancel()
	if err := c.copyFrozen(ctx, rec, b, ls, tmp); err != nil {
		ss.Discard(tmp)
		return nil, snapshot.Layer{}, snapErr(err)
	}
	c.snaps.mu.Lock()
	before := c.layerSet()
	top, err := ss.CommitOn(ctx, tmp, rec.SnapshotLayers)
	if err != nil {
		c.snaps.mu.Unlock()
		return nil, snapshot.Layer{}, snapErr(err)
	}
	if err := c.enforceQuotaAfter(before); err != nil {
		c.snaps.mu.Unlock()
		return nil, snapshot.Layer{}, err
	}
	chain := c.chainOf(ctx, rec)
	chain = append(chain, store.SnapshotLayer{Digest: top.Digest, Size: top.Size, Added: top.Added})
	return chain, top, nil
}

// copyFrozen copies the writable layer, freezing a running sandbox so no
// process changes a file during the copy; a backend that cannot freeze and
// says its copy is live (runtime.LiveLayerSnapshotter) copies it running.
func (c *Controller) copyFrozen(ctx context.Context, rec *store.Sandbox, b runtime.Backend, ls runtime.LayerSnapshotter, dst string) error {
	if rs, ok := ls.(runtime.RootLayerSnapshotter); ok && rec.Labels[labelBuilder] != "" {
		// A template's build away from this host: the step's files are
		// wherever it put them, not only in the home directory.
		img, err := c.image(ctx, rec.ImageDigest)
		if err != nil {
			return err
		}
		lower, err := c.layersFor(rec, img)
		if err != nil {
			return err
		}
		return rs.SnapshotRootLayer(ctx, rec.ID, dst, lower)
	}
	if rec.State != api.StateRunning {
		return ls.SnapshotLayer(ctx, rec.ID, dst)
	}
	if _, live := ls.(runtime.LiveLayerSnapshotter); live {
		// The backend cannot freeze: its copy is taken live, and says so
		// in its documentation (a file written meanwhile may be torn).
		c.log.Info("snapshot copied without a freeze", "sandbox", rec.ID, "runtime", rec.Runtime)
		return ls.SnapshotLayer(ctx, rec.ID, dst)
	}
	p, ok := b.(runtime.Pauser)
	if !ok {
		return fmt.Errorf("%s cannot freeze a sandbox for a consistent snapshot: %w", c.runtimeDesc(rec.Runtime), errdefs.ErrFailedPrecondition)
	}
	if err := p.Pause(ctx, rec.ID); err != nil {
		return fmt.Errorf("freeze sandbox %s for the snapshot: %w", rec.ID, err)
	}
	err := ls.SnapshotLayer(ctx, rec.ID, dst)
	if rerr := p.Resume(context.WithoutCancel(ctx), rec.ID); rerr != nil {
		c.log.Error("thaw after snapshot", "sandbox", rec.ID, "err", rerr)
		if err == nil {
			err = fmt.Errorf("thaw sandbox %s after the snapshot: %w", rec.ID, rerr)
		}
	}
	return err
}

// snapErr says "no space" in words a user can act on.
func snapErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("no space left in the snapshot store: %w", errdefs.ErrResourceExhausted)
	}
	return err
}

// chainOf returns rec's snapshot layers with their sizes, as far as the
// snapshot it was restored from still tells them.
func (c *Controller) chainOf(ctx context.Context, rec *store.Sandbox) []store.SnapshotLayer {
	sizes := map[string]int64{}
	if rec.SnapshotID != "" {
		if parent, err := c.opts.Store.GetSnapshot(ctx, rec.SnapshotID); err == nil {
			for _, l := range parent.Layers {
				sizes[l.Digest] = l.Size
			}
		}
	}
	out := make([]store.SnapshotLayer, 0, len(rec.SnapshotLayers)+1)
	for _, d := range rec.SnapshotLayers {
		out = append(out, store.SnapshotLayer{Digest: d, Size: sizes[d]})
	}
	return out
}

func (c *Controller) snapshotAPI(s *store.Snapshot) *api.Snapshot {
	out := &api.Snapshot{
		ID: s.ID, Name: s.Name, Size: s.Size, Image: s.Image, ImageDigest: s.ImageDigest,
		Parent: s.Parent, Sandbox: s.SandboxID, CreatedAt: s.CreatedAt, Layers: []string{},
		TTL: ttlString(s.TTL), CreatedBy: s.Owner,
	}
	if s.Memory != nil {
		out.Memory, out.MemorySize = true, s.Memory.Bytes
	}
	for _, l := range s.Layers {
		out.Layers = append(out.Layers, l.Digest)
		out.SizeTotal += l.Size
		out.SizeAdded += l.Added
	}
	if !s.ExpiresAt.IsZero() {
		t := s.ExpiresAt
		out.ExpiresAt = &t
	}
	return out
}

// resolveSnapshot finds a snapshot by id or name that ctx's caller may
// see (another owner's is not found, as if it did not exist). An expired
// snapshot the collector has not deleted yet is not found either. An id
// wins over a name; a name is resolved by pickNamed.
func (c *Controller) resolveSnapshot(ctx context.Context, ref string) (*store.Snapshot, error) {
	if !validRef(ref) {
		return nil, errdefs.Invalid("%q is not a valid snapshot id or name", rules.Truncate(ref, 80))
	}
	s, err := c.lookupSnapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	if c.expired(s) {
		return nil, errdefs.NotFound("snapshot %q (it expired at %s)", ref, s.ExpiresAt.Format(time.RFC3339))
	}
	return s, nil
}

func (c *Controller) lookupSnapshot(ctx context.Context, ref string) (*store.Snapshot, error) {
	if idRE.MatchString(ref) {
		s, err := c.opts.Store.GetSnapshot(ctx, ref)
		if err == nil && visible(ctx, s.Owner) {
			return s, nil
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return nil, err
		}
	}
	held, err := c.opts.Store.SnapshotsByName(ctx, ref)
	if err != nil {
		return nil, err
	}
	owner := func(s *store.Snapshot) string { return s.Owner }
	// Another owner's expired snapshot, not collected yet, makes no name
	// ambiguous; it is found only when nothing else is, to say it expired.
	live := slices.DeleteFunc(slices.Clone(held), func(s *store.Snapshot) bool { return s.Owner != Caller(ctx) && c.expired(s) })
	s, err := pickNamed(ctx, "snapshot", ref, live, owner)
	if errors.Is(err, errdefs.ErrNotFound) && len(live) < len(held) {
		return pickNamed(ctx, "snapshot", ref, held, owner)
	}
	return s, err
}

// GetSnapshot returns one snapshot by id or name.
func (c *Controller) GetSnapshot(ctx context.Context, ref string) (*api.Snapshot, error) {
	s, err := c.resolveSnapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	return c.snapshotAPI(s), nil
}

// ListSnapshots lists every snapshot ctx's caller may see that has not
// expired, oldest first.
func (c *Controller) ListSnapshots(ctx context.Context) ([]api.Snapshot, error) {
	list, err := c.opts.Store.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Snapshot, 0, len(list))
	for _, s := range list {
		if !c.expired(s) && visible(ctx, s.Owner) {
			out = append(out, *c.snapshotAPI(s))
		}
	}
	return out, nil
}

// DeleteSnapshot removes a snapshot's record, then every layer nothing
// uses any more. Sandboxes restored from it keep working: they name their
// layers themselves.
func (c *Controller) DeleteSnapshot(ctx context.Context, ref string) error {
	s, err := c.resolveSnapshot(ctx, ref)
	if err != nil {
		return err
	}
	if err := c.opts.Store.DeleteSnapshot(context.WithoutCancel(ctx), s.ID); err != nil {
		return err
	}
	c.log.Info("snapshot deleted", "snapshot", s.ID, "name", s.Name)
	c.collectLayers(context.WithoutCancel(ctx))
	return nil
}

// collectLayers removes stored layers no snapshot and no live sandbox
// names. Errors are logged: the next run tries again.
func (c *Controller) collectLayers(ctx context.Context) {
	ss, err := c.snapStore()
	if err != nil {
		return
	}
	c.snaps.mu.Lock()
	defer c.snaps.mu.Unlock()
	// Begun before the records are read: a layer a restore holds at any
	// moment of the pass is kept, even if its record was written after.
	gc := ss.BeginCollection()
	defer gc.End()
	used := map[string]bool{}
	snaps, err := c.opts.Store.ListSnapshots(ctx)
	if err != nil {
		c.log.Error("layer collection: list snapshots", "err", err)
		return
	}
	withMemory := map[string]bool{}
	for _, s := range snaps {
		for _, l := range s.Layers {
			used[l.Digest] = true
		}
		if s.Memory != nil {
			withMemory[s.ID] = true
		}
	}
	c.collectMemoryImages(withMemory) // memsnapshot.go
	sbs, err := c.opts.Store.ListSandboxes(ctx, nil)
	if err != nil {
		c.log.Error("layer collection: list sandboxes", "err", err)
		return
	}
	for _, sb := range sbs {
		for _, d := range sb.SnapshotLayers {
			used[d] = true
		}
	}
	if !c.templateLayersInUse(ctx, used) { // templates.go
		return
	}
	got, err := gc.RemoveUnused(used)
	for _, d := range got.Layers {
		c.log.Info("removed unused snapshot layer", "layer", d)
	}
	if len(got.Held) > 0 || got.Objects > 0 {
		c.log.Info("layer collection", "kept_held_by_restores", len(got.Held), "removed_pool_objects", got.Objects)
	}
	if err != nil {
		c.log.Error("layer collection", "err", err)
	}
}

// restorePlan is what a create from a snapshot adds to the sandbox.
type restorePlan struct {
	snap   *store.Snapshot
	onIdle string
}

// planCreate checks the snapshot-related fields of a create request before
// anything is recorded: the snapshot exists, every layer is on disk, and
// the image matches. It points req.Image at the snapshot's image.
func (c *Controller) planCreate(ctx context.Context, req *api.CreateSandboxRequest) (*restorePlan, error) {
	p := &restorePlan{onIdle: req.OnIdle}
	if err := c.checkOnIdle(req.OnIdle, nil); err != nil {
		return nil, err
	}
	if req.FromSnapshot == "" {
		return p, nil
	}
	ss, err := c.snapStore()
	if err != nil {
		return nil, err
	}
	snap, err := c.resolveSnapshot(ctx, req.FromSnapshot)
	if err != nil {
		return nil, err
	}
	for _, l := range snap.Layers {
		if _, err := ss.LayerPath(l.Digest); err != nil {
			return nil, fmt.Errorf("cannot restore snapshot %s: %w", snap.ID, err)
		}
	}
	if req.Image != "" {
		img, err := c.image(ctx, req.Image)
		if err != nil {
			return nil, err
		}
		if img.Digest != snap.ImageDigest {
			return nil, fmt.Errorf("snapshot %s was taken on image %s; it cannot be restored onto %s (%s): leave the image out to use the snapshot's: %w",
				snap.ID, snap.ImageDigest, req.Image, img.Digest, errdefs.ErrFailedPrecondition)
		}
	}
	if _, err := c.opts.Images.Resolve(ctx, snap.ImageDigest); err != nil {
		return nil, fmt.Errorf("snapshot %s needs image %s, which is not on this host: %w", snap.ID, snap.ImageDigest, errdefs.ErrFailedPrecondition)
	}
	if snap.Memory != nil {
		if err := c.planMemoryRestore(req, snap); err != nil { // memsnapshot.go
			return nil, err
		}
	}
	req.Image = snap.ImageDigest
	p.snap = snap
	return p, nil
}

// apply records the plan in a new sandbox's record. The snapshot's time to
// live is renewed once the sandbox runs (renewSnapshot), not here: a
// create refused later must not keep a snapshot alive.
func (p *restorePlan) apply(rec *store.Sandbox) {
	rec.OnIdle = p.onIdle
	if p.snap == nil {
		return
	}
	rec.SnapshotID = p.snap.ID
	rec.SnapshotLayers = nil
	for _, l := range p.snap.Layers {
		rec.SnapshotLayers = append(rec.SnapshotLayers, l.Digest)
	}
	if p.snap.Image != "" && !strings.HasPrefix(p.snap.Image, "sha256:") {
		rec.Image = p.snap.Image
	}
}

// layersFor returns the lower layers of rec's root filesystem: the image's,
// then its snapshot layers. A layer gone from disk is a clear error.
func (c *Controller) layersFor(rec *store.Sandbox, img *image.Image) ([]string, error) {
	snaps, err := c.snapshotLayerPaths(rec)
	if err != nil || len(snaps) == 0 {
		return img.Layers, err
	}
	return append(slices.Clone(img.Layers), snaps...), nil
}

// snapshotLayerPaths returns the host directories of rec's snapshot
// layers, lowest first. A layer gone from disk is a clear error.
func (c *Controller) snapshotLayerPaths(rec *store.Sandbox) ([]string, error) {
	out, err := c.layerPaths(rec.SnapshotLayers)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", rec.ID, err)
	}
	return out, nil
}

// layerPaths returns the host directories of the snapshot layers named by
// digests.
func (c *Controller) layerPaths(digests []string) ([]string, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	ss, err := c.snapStore()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(digests))
	for _, d := range digests {
		p, err := ss.LayerPath(d)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ExportSnapshot writes a snapshot as one file: a manifest and each layer
// as a tar whose sha256 is its digest.
func (c *Controller) ExportSnapshot(ctx context.Context, ref string, w io.Writer) error {
	ss, err := c.snapStore()
	if err != nil {
		return err
	}
	s, err := c.resolveSnapshot(ctx, ref)
	if err != nil {
		return err
	}
	m := snapshot.Manifest{Name: s.Name, Image: s.Image, ImageDigest: s.ImageDigest, CreatedAt: s.CreatedAt}
	for _, l := range s.Layers {
		m.Layers = append(m.Layers, snapshot.Layer{Digest: l.Digest, Size: l.Size})
	}
	var memDir string
	if s.Memory != nil {
		if memDir, err = c.exportMemory(s, &m); err != nil { // memexport.go
			return err
		}
	}
	return ss.Export(ctx, m, memDir, w)
}

// ImportOptions tune ImportSnapshot.
type ImportOptions struct {
	Name string // "" = the name in the file, if it is free
	TTL  string
	// MaxBytes bounds the files the import may hold (default 64 GiB).
	MaxBytes int64
	// FilesOnly imports a memory snapshot's files and leaves its memory
	// image out.
	FilesOnly bool
}

// ImportSnapshot reads an exported snapshot file, verifying every layer's
// checksum and refusing unsafe entries, and records it.
func (c *Controller) ImportSnapshot(ctx context.Context, r io.Reader, opts ImportOptions) (*api.Snapshot, error) {
	ss, err := c.snapStore()
	if err != nil {
		return nil, err
	}
	ttl, err := parseTTL(opts.TTL)
	if err != nil {
		return nil, err
	}
	if err := c.validSnapshotName(ctx, opts.Name); err != nil {
		return nil, err
	}
	if err := c.checkStoreRoom(0); err != nil { // quota.go
		return nil, err
	}
	// The client's bytes are read and unpacked into private temporary
	// layers first, without the lock every snapshot of every owner takes:
	// a slow or huge upload holds up no one else. Only the commit, local
	// work, is serialised.
	mi, err := c.stageMemoryImport(opts.FilesOnly) // memexport.go
	if err != nil {
		return nil, err
	}
	defer mi.discard()
	staged, err := ss.Stage(ctx, r, snapshot.Limits{MaxBytes: opts.MaxBytes}, mi.dir)
	if err != nil {
		return nil, snapErr(err)
	}
	defer staged.Discard()
	var mem *store.SnapshotMemory
	if sm := staged.Manifest(); sm.Memory != nil && !opts.FilesOnly {
		if mem, err = c.acceptMemory(&sm, mi.dir); err != nil {
			return nil, err
		}
	}
	c.snaps.mu.Lock()
	defer c.snaps.mu.Unlock()
	before := c.layerSet()
	m, err := staged.Commit(context.WithoutCancel(ctx))
	if err != nil {
		return nil, snapErr(err)
	}
	if err := c.enforceQuotaAfter(before); err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" && m.Name != "" {
		if err := c.validSnapshotName(ctx, m.Name); err == nil {
			name = m.Name
		}
	}
	now := c.now()
	s := &store.Snapshot{
		ID: newID(), Name: name, Image: m.Image, ImageDigest: m.ImageDigest,
		CreatedAt: now, TTL: ttl, ExpiresAt: expiry(now, ttl), Owner: Caller(ctx),
	}
	for _, l := range m.Layers {
		s.Layers = append(s.Layers, store.SnapshotLayer{Digest: l.Digest, Size: l.Size, Added: l.Added})
	}
	s.Size = m.Layers[len(m.Layers)-1].Size
	if mem != nil {
		s.Memory = mem
		if err := mi.keep(s.ID); err != nil {
			return nil, snapErr(err)
		}
	}
	if err := c.opts.Store.CreateSnapshot(context.WithoutCancel(ctx), s); err != nil {
		if mem != nil {
			_ = os.RemoveAll(c.snapshotMemoryDir(s.ID))
		}
		return nil, err
	}
	c.log.Info("snapshot imported", "snapshot", s.ID, "name", s.Name, "layers", len(s.Layers), "memory", mem != nil)
	return c.snapshotAPI(s), nil
}
