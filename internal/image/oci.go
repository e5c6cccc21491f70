package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/tarsafe"
)

// Bounds on imported images, which come from outside.
const (
	// MaxImageLayers keeps the overlay mount's option string within a page.
	MaxImageLayers    = 40
	maxConfigEnv      = 1024
	maxConfigString   = 4096
	maxSourceLen      = 512
	maxImageRecord    = 1 << 20
	DefaultMaxArchive = 32 << 30
)

// importedRecord is the on-disk form of imported/<hex>.json.
type importedRecord struct {
	Digest       string    `json:"digest"`
	Source       string    `json:"source"`
	ConfigDigest string    `json:"config_digest"`
	Layers       []string  `json:"layers"` // diff_ids, lowest first
	Env          []string  `json:"env,omitempty"`
	WorkingDir   string    `json:"working_dir,omitempty"`
	User         string    `json:"user,omitempty"`
	Entrypoint   []string  `json:"entrypoint,omitempty"`
	Cmd          []string  `json:"cmd,omitempty"`
	Size         int64     `json:"size"`
	CreatedAt    time.Time `json:"created_at"`
	// Owner is the caller that first imported or pulled the image, and
	// Charged the bytes that import wrote to disk (its layers that were
	// new to the store), counted against the owner's cap.
	Owner   string `json:"owner,omitempty"`
	Charged int64  `json:"charged,omitempty"`
}

func (s *Store) importedDir() string { return filepath.Join(s.dir, "imported") }

func (s *Store) recordImage(rec importedRecord) *Image {
	img := &Image{
		Name: rec.Digest, Digest: rec.Digest, Source: rec.Source, SizeBytes: rec.Size, CreatedAt: rec.CreatedAt,
		Env: rec.Env, WorkingDir: rec.WorkingDir, User: rec.User, Entrypoint: rec.Entrypoint, Cmd: rec.Cmd,
		Owner: rec.Owner,
	}
	if rec.Source != "" {
		img.Name = rec.Source
	}
	for _, l := range rec.Layers {
		img.Layers = append(img.Layers, s.layerPath(l))
	}
	return img
}

func (s *Store) readImported(hexDigest string) (importedRecord, error) {
	var rec importedRecord
	data, err := os.ReadFile(filepath.Join(s.importedDir(), hexDigest+".json"))
	if err != nil {
		return rec, err
	}
	if len(data) > maxImageRecord || json.Unmarshal(data, &rec) != nil || rec.Digest != digestPrefix+hexDigest || rec.Charged < 0 {
		return rec, fmt.Errorf("image record %s is damaged", hexDigest)
	}
	for _, l := range rec.Layers {
		if !validDigest(l) {
			return rec, fmt.Errorf("image record %s is damaged", hexDigest)
		}
	}
	return rec, nil
}

func (s *Store) listImportedRecords() ([]importedRecord, error) {
	ents, err := os.ReadDir(s.importedDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []importedRecord
	for _, e := range ents {
		h, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validHex(h) {
			continue
		}
		rec, err := s.readImported(h)
		if err != nil {
			s.log.Warn("damaged image record ignored", "file", e.Name(), "err", err)
			continue
		}
		out = append(out, rec)
	}
	return out, nil
}

// resolveImported finds an imported image by digest or by the reference it
// was imported or pulled from (the newest such import that ctx's caller
// may be handed by name wins: ForCaller). Neither image nor error: ref is
// for the builtin resolution to judge.
func (s *Store) resolveImported(ctx context.Context, ref string) (*Image, error) {
	if strings.HasPrefix(ref, digestPrefix) && validHex(ref[len(digestPrefix):]) {
		rec, err := s.readImported(ref[len(digestPrefix):])
		if err != nil {
			return nil, nil
		}
		return s.recordImage(rec), nil
	}
	if ref == "" || len(ref) > maxSourceLen || isBuiltin(ref) || strings.HasPrefix(ref, digestPrefix) {
		return nil, nil
	}
	recs, _ := s.listImportedRecords()
	var best *importedRecord
	bestRank := 0
	for i := range recs {
		if recs[i].Source != ref {
			continue
		}
		r := rank(ctx, recs[i].Owner)
		if r >= 0 && (best == nil || r < bestRank || r == bestRank && recs[i].CreatedAt.After(best.CreatedAt)) {
			best, bestRank = &recs[i], r
		}
	}
	if best != nil {
		return s.recordImage(*best), nil
	}
	if _, err := name.ParseReference(ref); err == nil && strings.ContainsAny(ref, "/:") &&
		!strings.Contains(ref, "..") && !strings.HasPrefix(ref, ".") && !strings.HasPrefix(ref, "/") {
		return nil, errdefs.NotFound("no image was imported or pulled from %q; pull it first", printable(ref))
	}
	return nil, nil
}

func (s *Store) listImported(ctx context.Context) ([]*Image, error) {
	recs, err := s.listImportedRecords()
	if err != nil {
		return nil, err
	}
	out := make([]*Image, 0, len(recs))
	for _, r := range recs {
		out = append(out, s.recordImage(r))
	}
	return out, ctx.Err()
}

// Pull fetches ref from an OCI registry, anonymously or with the
// caller's opts.Auth (the daemon's own credentials are never offered to a
// registry a caller names), and stores it under its manifest digest, for
// opts.Owner and within its cap (opts.Source and opts.MaxArchive are not
// used).
func (s *Store) Pull(ctx context.Context, ref string, opts ImportOptions) (*Image, error) {
	if ref == "" || len(ref) > maxSourceLen {
		return nil, errdefs.Invalid("image reference must be 1 to %d bytes", maxSourceLen)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errdefs.Invalid("image reference %q: %v", printable(ref), err)
	}
	progress := orNop(opts.Progress)
	progress("resolving " + r.String())
	var auth authn.Authenticator = authn.Anonymous
	if a := opts.Auth; a != nil {
		auth = &authn.Basic{Username: a.Username, Password: a.Password}
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuth(auth),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}))
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %v: %w", printable(ref), err, errdefs.ErrUnavailable)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %v: %w", printable(ref), err, errdefs.ErrUnavailable)
	}
	opts.Source, opts.Progress = r.String(), progress
	return s.store(ctx, img, d, true, opts)
}

// Import stores the image in a docker-archive (`docker save`) or OCI-layout
// tarball read from r, for opts.Owner and within its cap.
//
// The archive is received whole (it may not be larger than what the owner
// may still store), then its layers are unpacked; every file is charged to
// the owner before it is written, so an import that would pass the cap
// fails before writing past it and leaves nothing behind.
func (s *Store) Import(ctx context.Context, r io.Reader, opts ImportOptions) (*Image, error) {
	maxBytes := opts.MaxArchive
	if maxBytes <= 0 {
		maxBytes = DefaultMaxArchive
	}
	if len(opts.Source) > maxSourceLen {
		return nil, errdefs.Invalid("image source name longer than %d bytes", maxSourceLen)
	}
	opts.Progress = orNop(opts.Progress)
	budget, unlockOwner, err := s.ownerImport(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer unlockOwner()
	archiveMax, why := maxBytes, fmt.Sprintf("the largest archive accepted is %d bytes", maxBytes)
	if rem := budget.remaining(); rem >= 0 && rem < archiveMax {
		archiveMax, why = rem, fmt.Sprintf("the images %s imported hold %d bytes on disk, and the limit per caller is %d (PADDOCK_IMAGE_IMPORT_MAX_PER_KEY), which leaves %d; delete images it imported to make room",
			ownerName(opts.Owner), budget.used, opts.MaxOwnerBytes, rem)
	}
	unlock, err := flockWait(ctx, filepath.Join(s.dir, "builds.lock"), false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	work, err := newWorkDir(s.tmpDir())
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer func() {
		if err := removeTree(work); err != nil {
			s.log.Error("import directory left behind", "dir", work, "err", err)
		}
	}()
	archive := filepath.Join(work, "archive.tar")
	f, err := os.OpenFile(archive, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(r, archiveMax+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("import: receiving archive: %w", err)
	}
	if n > archiveMax {
		return nil, fmt.Errorf("import: the archive is larger than %d bytes: %s: %w", archiveMax, why, errdefs.ErrResourceExhausted)
	}
	opts.Progress(fmt.Sprintf("received %d bytes", n))
	img, digest, tag, compressed, err := openArchive(archive, filepath.Join(work, "layout"))
	if err != nil {
		return nil, err
	}
	if opts.Source == "" {
		opts.Source = tag
	}
	return s.storeLocked(ctx, img, digest, compressed, opts, budget)
}

func orNop(p Progress) Progress {
	if p == nil {
		return func(string) {}
	}
	return p
}

// store writes img's layers and record, holding the store's build lock
// shared so a concurrent gc cannot take layers it has not seen recorded.
func (s *Store) store(ctx context.Context, img v1.Image, digest v1.Hash, compressed bool, opts ImportOptions) (*Image, error) {
	budget, unlockOwner, err := s.ownerImport(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer unlockOwner()
	unlock, err := flockWait(ctx, filepath.Join(s.dir, "builds.lock"), false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.storeLocked(ctx, img, digest, compressed, opts, budget)
}

// storeLocked unpacks and records img; the caller holds the build lock
// shared and owner's import lock. Layers it wrote are removed again when
// it fails on the budget, so a refused import leaves nothing.
func (s *Store) storeLocked(ctx context.Context, img v1.Image, digest v1.Hash, compressed bool, opts ImportOptions, budget *importBudget) (*Image, error) {
	start := time.Now()
	source, progress := opts.Source, orNop(opts.Progress)
	if digest.Algorithm != "sha256" || !validHex(digest.Hex) {
		return nil, errdefs.Invalid("image digest %q is not sha256", printable(digest.String()))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, badImage("reading image config: %v", err)
	}
	cfgDigest, err := img.ConfigName()
	if err != nil {
		return nil, badImage("image config digest: %v", err)
	}
	if cfg.OS != "" && cfg.OS != "linux" {
		return nil, badImage("image is for %q, not linux", printable(cfg.OS))
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, badImage("listing layers: %v", err)
	}
	diffIDs := cfg.RootFS.DiffIDs
	if len(layers) != len(diffIDs) {
		return nil, badImage("manifest lists %d layers but config lists %d", len(layers), len(diffIDs))
	}
	if len(layers) > MaxImageLayers {
		return nil, badImage("%d layers; at most %d are supported", len(layers), MaxImageLayers)
	}
	rec := importedRecord{
		Digest: digest.String(), Source: source, ConfigDigest: cfgDigest.String(),
		CreatedAt: time.Now().UTC().Truncate(time.Second), Owner: opts.Owner,
	}
	if err := fillConfig(&rec, cfg.Config); err != nil {
		return nil, err
	}
	for i, id := range diffIDs {
		if id.Algorithm != "sha256" || !validHex(id.Hex) {
			return nil, badImage("layer %d: diff_id %q is not sha256", i, printable(id.String()))
		}
	}
	hexes := make([]string, len(diffIDs))
	for i, id := range diffIDs {
		hexes[i] = id.Hex
	}
	defer s.holdLayers(hexes...)()
	var added []string
	for i, l := range layers {
		id := diffIDs[i]
		size, isNew, err := s.ensureLayer(ctx, l, id, compressed, budget)
		if err != nil {
			s.dropLayers(added)
			return nil, fmt.Errorf("layer %d/%d (%s): %w", i+1, len(layers), id, err)
		}
		if isNew {
			added = append(added, id.Hex)
		}
		rec.Size += size
		rec.Layers = append(rec.Layers, id.String())
		progress(fmt.Sprintf("layer %d/%d %s ok", i+1, len(layers), shortHex(id.Hex)))
	}
	rec.Charged = budget.charged
	if old, err := s.readImported(digest.Hex); err == nil {
		// Imported before: the first importer keeps it and its charge;
		// this import stored nothing new but the layers it had to restore.
		rec.Owner, rec.Charged = old.Owner, old.Charged+rec.Charged
		rec.Size = max(rec.Size, old.Size)
	}
	if err := s.writeImported(rec); err != nil {
		s.dropLayers(added)
		return nil, fmt.Errorf("image %s: %w", rec.Digest, err)
	}
	s.log.Info("image stored", "digest", rec.Digest, "source", source, "layers", len(rec.Layers), "elapsed", time.Since(start).Round(time.Millisecond))
	progress(fmt.Sprintf("stored image %s", rec.Digest))
	return s.recordImage(rec), nil
}

func shortHex(h string) string { return h[:12] }

func badImage(format string, args ...any) error {
	return fmt.Errorf("image refused: "+format+": %w", append(args, errdefs.ErrInvalidArgument)...)
}

func fillConfig(rec *importedRecord, c v1.Config) error {
	if len(c.Env) > maxConfigEnv {
		return badImage("config has more than %d env entries", maxConfigEnv)
	}
	for _, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || len(kv) > maxConfigString || strings.ContainsRune(kv, 0) {
			return badImage("config env entry %q is malformed", printable(kv))
		}
	}
	for _, v := range append(append([]string{c.WorkingDir, c.User}, c.Entrypoint...), c.Cmd...) {
		if len(v) > maxConfigString || strings.ContainsRune(v, 0) {
			return badImage("config has a malformed string %q", printable(v))
		}
	}
	if c.WorkingDir != "" && !strings.HasPrefix(c.WorkingDir, "/") {
		return badImage("config working dir %q is not absolute", printable(c.WorkingDir))
	}
	rec.Env, rec.WorkingDir, rec.User = c.Env, c.WorkingDir, c.User
	rec.Entrypoint, rec.Cmd = c.Entrypoint, c.Cmd
	return nil
}

// ensureLayer makes sure the layer with diff_id id is unpacked, verifying
// every byte read against the digests the image names. A layer already in
// the store was verified when it was stored.
func (s *Store) ensureLayer(ctx context.Context, l v1.Layer, id v1.Hash, compressed bool, budget Budget) (size int64, isNew bool, err error) {
	dst := s.layerPath(id.String())
	if dirExists(dst) {
		return 0, false, nil
	}
	size, err = s.unpackLayer(ctx, l, id, compressed, budget, dst)
	return size, err == nil, err
}

func (s *Store) unpackLayer(ctx context.Context, l v1.Layer, id v1.Hash, compressed bool, budget Budget, dst string) (int64, error) {
	work, err := newWorkDir(s.tmpDir())
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := removeTree(work); err != nil {
			s.log.Error("layer directory left behind", "dir", work, "err", err)
		}
	}()
	rootfs := filepath.Join(work, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return 0, err
	}
	var rc io.ReadCloser
	var blobWant v1.Hash
	if compressed {
		if blobWant, err = l.Digest(); err != nil {
			return 0, badImage("layer digest: %v", err)
		}
		rc, err = l.Compressed()
	} else {
		blobWant = id
		rc, err = l.Uncompressed()
	}
	if err != nil {
		return 0, fmt.Errorf("opening layer: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer rc.Close()
	stats, err := unpackVerified(ctx, rc, blobWant, id, rootfs, budget)
	if err != nil {
		return 0, err
	}
	if err := syncFS(rootfs); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(s.layersDir(), 0o755); err != nil {
		return 0, err
	}
	if err := os.Rename(work, filepath.Dir(dst)); err != nil && !dirExists(dst) {
		return 0, fmt.Errorf("storing layer: %w", err)
	}
	return stats.Bytes, syncDir(s.layersDir())
}

// unpackVerified extracts a layer blob (gzip, zstd or plain tar) while
// hashing both the blob and the tar inside it; a mismatch with either
// expected digest, or a short blob, fails the layer.
func unpackVerified(ctx context.Context, rc io.Reader, blobWant, diffWant v1.Hash, rootfs string, budget Budget) (ExtractStats, error) {
	blobHash := sha256.New()
	br := bufio.NewReader(io.TeeReader(rc, blobHash))
	magic, _ := br.Peek(4)
	var tarStream io.Reader = br
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return ExtractStats{}, badLayer("gzip: %v", err)
		}
		defer zr.Close()
		tarStream = zr
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return ExtractStats{}, badLayer("zstd: %v", err)
		}
		defer zr.Close()
		tarStream = zr
	}
	diffHash := sha256.New()
	tee := io.TeeReader(tarStream, diffHash)
	stats, err := ExtractLayer(ctx, tee, rootfs, ExtractOptions{Budget: budget})
	if errors.Is(err, errdefs.ErrResourceExhausted) {
		return stats, err // refused before writing: nothing to verify
	}
	if err != nil {
		return stats, verifyCause(err, br, blobHash, blobWant)
	}
	// The digests cover the whole stream: read what follows the tar's end
	// marker (bounded, it is normally a few KiB of zero padding).
	if _, err := io.Copy(io.Discard, io.LimitReader(tee, 1<<20)); err != nil {
		return stats, verifyCause(badLayer("reading layer: %v", err), br, blobHash, blobWant)
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(br, 1<<20)); err != nil {
		return stats, badLayer("reading layer: %v", err)
	}
	if got := hexSum(blobHash); got != blobWant.Hex {
		return stats, badLayer("blob digest mismatch: want %s, got sha256:%s", blobWant, got)
	}
	if got := hexSum(diffHash); got != diffWant.Hex {
		return stats, badLayer("content digest mismatch: want diff_id %s, got sha256:%s", diffWant, got)
	}
	return stats, nil
}

// verifyCause reports a digest mismatch rather than the parse error it
// caused, when the blob turns out to be damaged: that is the real fault.
func verifyCause(err error, rest io.Reader, h hash.Hash, want v1.Hash) error {
	if _, cerr := io.Copy(io.Discard, io.LimitReader(rest, 256<<20)); cerr != nil {
		return badLayer("blob %s failed verification (damaged or truncated in transit): %v", want, cerr)
	}
	if got := hexSum(h); got != want.Hex {
		return badLayer("blob digest mismatch (damaged or truncated): want %s, got sha256:%s", want, got)
	}
	return err
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

func (s *Store) writeImported(rec importedRecord) error {
	if err := os.MkdirAll(s.importedDir(), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.tmpDir(), "image-*.json")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.importedDir(), rec.Digest[len(digestPrefix):]+".json")); err != nil {
		return err
	}
	return syncDir(s.importedDir())
}

// openArchive recognises an OCI layout (index.json) or a docker archive
// (manifest.json). An OCI layout is unpacked, plain files only, into dir.
func openArchive(archive, dir string) (v1.Image, v1.Hash, string, bool, error) {
	names, err := tarNames(archive)
	if err != nil {
		return nil, v1.Hash{}, "", false, err
	}
	if names["index.json"] && names["oci-layout"] {
		return openLayout(archive, dir)
	}
	if !names["manifest.json"] {
		return nil, v1.Hash{}, "", false, badImage("archive has neither index.json (OCI layout) nor manifest.json (docker save)")
	}
	opener := func() (io.ReadCloser, error) { return os.Open(archive) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, v1.Hash{}, "", false, badImage("docker archive manifest: %v", err)
	}
	if len(m) != 1 {
		return nil, v1.Hash{}, "", false, badImage("docker archive holds %d images; import one at a time", len(m))
	}
	img, err := tarball.Image(opener, nil)
	if err != nil {
		return nil, v1.Hash{}, "", false, badImage("docker archive: %v", err)
	}
	// A docker archive carries no manifest of its own: the config digest
	// (docker's image ID) is what names it.
	d, err := img.ConfigName()
	if err != nil {
		return nil, v1.Hash{}, "", false, badImage("docker archive config: %v", err)
	}
	tag := ""
	if len(m[0].RepoTags) > 0 {
		tag = m[0].RepoTags[0]
	}
	return img, d, tag, false, nil
}

func tarNames(archive string) (map[string]bool, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := make(map[string]bool)
	tr := tar.NewReader(f)
	for len(names) < DefaultMaxLayerEntries {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, badImage("archive is not a readable tar: %v", err)
		}
		if tarsafe.Sparse(h) {
			// Read through archive/tar, its holes would be gigabytes
			// of layer from a few bytes of archive.
			return nil, badImage("archive entry %q is a sparse file; sparse entries are not supported", printable(h.Name))
		}
		names[strings.TrimPrefix(h.Name, "./")] = true
	}
	return nil, badImage("archive has too many entries")
}
