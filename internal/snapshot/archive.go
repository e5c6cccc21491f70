package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/tarsafe"
)

// ArchiveFormat names the export format; an importer refuses others.
const ArchiveFormat = "paddock-snapshot/v1"

const (
	manifestName    = "manifest.json"
	maxManifestSize = 64 << 10
	// MaxChain bounds the layers of one snapshot: overlayfs takes its lower
	// directories in one mount option of at most a page.
	MaxChain = 16
)

// Manifest is the first entry of an exported snapshot file. Layers are
// lowest first; each is stored as layers/<hex>.tar, whose sha256 is its
// digest.
type Manifest struct {
	Format      string    `json:"format"`
	Name        string    `json:"name,omitempty"`
	Image       string    `json:"image,omitempty"`
	ImageDigest string    `json:"image_digest"`
	CreatedAt   time.Time `json:"created_at"`
	Layers      []Layer   `json:"layers"`
	// Memory is the memory image of a memory snapshot, whose files follow
	// the layers as memory/<name>.
	Memory *MemoryImage `json:"memory,omitempty"`
}

// MemoryImage lists the files of an exported memory image. Meta and Seal
// belong to the exporter (what restores the image, and its proof that
// the image is its own); the store only moves the files and checks each
// against its size and SHA-256.
type MemoryImage struct {
	Meta  json.RawMessage `json:"meta"`
	Files []MemoryFile    `json:"files"`
	Seal  string          `json:"seal"`
}

// MemoryFile is one file of an exported memory image.
type MemoryFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

const (
	maxMemoryFiles = 64
	maxMemoryMeta  = 8 << 10
	maxMemorySeal  = 256
)

func memoryEntry(name string) string { return "memory/" + name }

// validMemoryName: a plain file name, never a path.
func validMemoryName(n string) bool {
	if n == "" || n == "." || n == ".." || len(n) > 255 {
		return false
	}
	for _, r := range n {
		if r == '/' || r == 0 || r == '\\' {
			return false
		}
	}
	return true
}

func (mi *MemoryImage) validate() error {
	if len(mi.Files) == 0 || len(mi.Files) > maxMemoryFiles {
		return errdefs.Invalid("snapshot file's memory image must hold 1 to %d files, has %d", maxMemoryFiles, len(mi.Files))
	}
	if len(mi.Meta) > maxMemoryMeta || len(mi.Seal) > maxMemorySeal {
		return errdefs.Invalid("snapshot file's memory image description is too long")
	}
	seen := map[string]bool{}
	for _, f := range mi.Files {
		if !validMemoryName(f.Name) || f.Size < 0 || !validHex256(f.SHA256) {
			return errdefs.Invalid("snapshot file has an invalid memory image entry")
		}
		if seen[f.Name] {
			return errdefs.Invalid("snapshot file lists memory file %s twice", truncate(f.Name, 100))
		}
		seen[f.Name] = true
	}
	return nil
}

func validHex256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

func layerEntry(digest string) string {
	return "layers/" + strings.TrimPrefix(digest, "sha256:") + ".tar"
}

// Validate checks a manifest read from outside.
func (m *Manifest) Validate() error {
	if m.Format != ArchiveFormat {
		return errdefs.Invalid("not a Paddock snapshot file (format %q, want %q)", truncate(m.Format, 40), ArchiveFormat)
	}
	if !ValidDigest(m.ImageDigest) {
		return errdefs.Invalid("snapshot file names no valid image digest")
	}
	if len(m.Layers) == 0 || len(m.Layers) > MaxChain {
		return errdefs.Invalid("snapshot file must hold 1 to %d layers, has %d", MaxChain, len(m.Layers))
	}
	seen := map[string]bool{}
	for _, l := range m.Layers {
		if !ValidDigest(l.Digest) || l.Size < 0 {
			return errdefs.Invalid("snapshot file has an invalid layer entry")
		}
		if seen[l.Digest] {
			return errdefs.Invalid("snapshot file lists layer %s twice", l.Digest)
		}
		seen[l.Digest] = true
	}
	if len(m.Name) > 63 || len(m.Image) > 256 {
		return errdefs.Invalid("snapshot file has an overlong name")
	}
	if m.Memory != nil {
		return m.Memory.validate()
	}
	return nil
}

// Export writes m and its layers (which must be in the store) as one tar
// file. Every layer is verified against its digest first, so a layer
// damaged on disk is never exported under its old name. A manifest with a
// memory image takes its files from memDir, each checked against its
// listed size and hash as it is written (the stream fails on a mismatch).
func (s *Store) Export(ctx context.Context, m Manifest, memDir string, w io.Writer) error {
	m.Format = ArchiveFormat
	for i, l := range m.Layers {
		v, err := s.VerifyLayer(ctx, l.Digest)
		if err != nil {
			return err
		}
		m.Layers[i].Size = v.Size
	}
	if err := m.Validate(); err != nil {
		return err
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("snapshot: encode manifest: %w", err)
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o644, Size: int64(len(mb)), ModTime: m.CreatedAt, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("snapshot: write export: %w", err)
	}
	if _, err := tw.Write(mb); err != nil {
		return fmt.Errorf("snapshot: write export: %w", err)
	}
	for _, l := range m.Layers {
		if err := tw.WriteHeader(&tar.Header{Name: layerEntry(l.Digest), Mode: 0o644, Size: l.Size, ModTime: m.CreatedAt, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("snapshot: write export: %w", err)
		}
		if err := s.WriteLayer(ctx, l.Digest, tw); err != nil {
			return err
		}
	}
	if m.Memory != nil {
		for _, f := range m.Memory.Files {
			if err := writeMemoryFile(ctx, tw, memDir, f, m.CreatedAt); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("snapshot: write export: %w", err)
	}
	return nil
}

// writeMemoryFile writes one memory file into the export, checking it
// against its listing.
func writeMemoryFile(ctx context.Context, tw *tar.Writer, dir string, f MemoryFile, mod time.Time) error {
	in, err := os.OpenFile(filepath.Join(dir, f.Name), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("snapshot: memory image: %w", err)
	}
	defer in.Close()
	if err := tw.WriteHeader(&tar.Header{Name: memoryEntry(f.Name), Mode: 0o600, Size: f.Size, ModTime: mod, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("snapshot: write export: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(ctxReader{ctx, in}, f.Size))
	if err != nil {
		return fmt.Errorf("snapshot: write export: %w", err)
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("snapshot: memory file %s changed on disk since it was sealed: %w", f.Name, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// ctxReader stops a long copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ErrChecksum is wrapped when an imported file's content does not match
// its manifest: corrupted, truncated or tampered with.
var ErrChecksum = fmt.Errorf("checksum mismatch: %w", errdefs.ErrInvalidArgument)

// Import reads an exported snapshot file and stores it: Stage, then
// Commit. Callers that serialise commits against a collector of unused
// layers Stage first, outside their lock, and Commit under it.
func (s *Store) Import(ctx context.Context, r io.Reader, lim Limits) (*Manifest, error) {
	st, err := s.Stage(ctx, r, lim, "")
	if err != nil {
		return nil, err
	}
	return st.Commit(ctx)
}

// Staged is a snapshot file read to its end and unpacked into private
// temporary layers, not yet in the store. Commit or Discard it.
type Staged struct {
	s    *Store
	m    Manifest
	tmps []string // one per layer of m, lowest first
}

// Manifest is the staged file's manifest.
func (st *Staged) Manifest() Manifest { return st.m }

// Discard removes what Stage unpacked. It may be called after Commit.
func (st *Staged) Discard() {
	for _, t := range st.tmps {
		if t != "" {
			st.s.Discard(t)
		}
	}
	st.tmps = nil
}

// Stage reads an exported snapshot file to its end, checking the manifest
// and each layer's sha256 and size, and unpacks each layer with Extract's
// rules into a temporary directory of its own. It takes no lock of the
// store: however slowly the file arrives, other snapshots go on.
//
// lim.MaxBytes bounds the file content of all layers together, counted as
// written; an entry larger than what its layer's declared size or that
// bound leaves is refused before any of it is written, and so is a sparse
// entry, at either level of the file.
//
// A memory image's files are written into memDir (an empty directory the
// caller made and removes) within the same bound, each checked against
// its listed size and SHA-256; with memDir "" they are checked and
// dropped.
func (s *Store) Stage(ctx context.Context, r io.Reader, lim Limits, memDir string) (*Staged, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = 64 << 30
	}
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("snapshot file is empty, truncated or not a tar file: %v: %w", err, ErrChecksum)
	}
	if hdr.Name != manifestName || hdr.Typeflag != tar.TypeReg || hdr.Size > maxManifestSize || tarsafe.Sparse(hdr) {
		return nil, errdefs.Invalid("snapshot file must start with %s", manifestName)
	}
	mb, err := io.ReadAll(io.LimitReader(tr, maxManifestSize))
	if err != nil {
		return nil, fmt.Errorf("snapshot file is truncated in its manifest: %w", ErrChecksum)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(mb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, errdefs.Invalid("snapshot manifest is not valid JSON: %v", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	st := &Staged{s: s, m: m}
	fail := func(err error) (*Staged, error) {
		st.Discard()
		return nil, err
	}
	var written int64
	for _, l := range m.Layers {
		hdr, err := tr.Next()
		if err != nil {
			return fail(fmt.Errorf("snapshot file is truncated before layer %s: %w", l.Digest, ErrChecksum))
		}
		if hdr.Name != layerEntry(l.Digest) || hdr.Typeflag != tar.TypeReg {
			return fail(errdefs.Invalid("snapshot file entry %q is not the expected %s", truncate(hdr.Name, 100), layerEntry(l.Digest)))
		}
		if tarsafe.Sparse(hdr) {
			return fail(unsafeEntry(hdr.Name, "is a sparse file (snapshot files hold none)"))
		}
		if hdr.Size != l.Size {
			return fail(fmt.Errorf("layer %s is %d bytes, the manifest says %d: %w", l.Digest, hdr.Size, l.Size, ErrChecksum))
		}
		// A layer's files cannot hold more than its tar does.
		layerLim := Limits{MaxEntries: lim.MaxEntries, MaxBytes: min(l.Size, lim.MaxBytes-written)}
		if layerLim.MaxBytes <= 0 {
			return fail(fmt.Errorf("snapshot: archive holds more than %d bytes: %w", lim.MaxBytes, errdefs.ErrResourceExhausted))
		}
		tmp, n, err := s.stageLayer(ctx, tr, l, layerLim)
		written += n
		if err != nil {
			return fail(err)
		}
		st.tmps = append(st.tmps, tmp)
	}
	if m.Memory != nil {
		for _, f := range m.Memory.Files {
			n, err := stageMemoryFile(ctx, tr, memDir, f, lim.MaxBytes-written)
			written += n
			if err != nil {
				return fail(err)
			}
		}
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return fail(errdefs.Invalid("snapshot file has data after its last entry"))
	}
	return st, nil
}

// stageMemoryFile reads the next entry, which must be memory file f of at
// most budget bytes, into dir (or nowhere), checking its hash.
func stageMemoryFile(ctx context.Context, tr *tar.Reader, dir string, f MemoryFile, budget int64) (int64, error) {
	hdr, err := tr.Next()
	if err != nil {
		return 0, fmt.Errorf("snapshot file is truncated before memory file %s: %w", truncate(f.Name, 100), ErrChecksum)
	}
	if hdr.Name != memoryEntry(f.Name) || hdr.Typeflag != tar.TypeReg {
		return 0, errdefs.Invalid("snapshot file entry %q is not the expected %s", truncate(hdr.Name, 100), truncate(memoryEntry(f.Name), 100))
	}
	if tarsafe.Sparse(hdr) {
		return 0, unsafeEntry(hdr.Name, "is a sparse file (snapshot files hold none)")
	}
	if hdr.Size != f.Size {
		return 0, fmt.Errorf("memory file %s is %d bytes, the manifest says %d: %w", truncate(f.Name, 100), hdr.Size, f.Size, ErrChecksum)
	}
	if f.Size > budget {
		return 0, fmt.Errorf("snapshot: archive holds more than its bound allows: %w", errdefs.ErrResourceExhausted)
	}
	var out io.Writer = io.Discard
	var file *os.File
	if dir != "" {
		file, err = os.OpenFile(filepath.Join(dir, f.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return 0, fmt.Errorf("snapshot: stage memory file: %w", err)
		}
		defer file.Close()
		out = file
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), ctxReader{ctx, tr})
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("snapshot file is truncated in memory file %s: %w", truncate(f.Name, 100), ErrChecksum)
		}
		return n, err
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return n, fmt.Errorf("memory file %s does not match its checksum (corrupted, truncated or tampered file): %w", truncate(f.Name, 100), ErrChecksum)
	}
	if file != nil {
		if err := file.Sync(); err != nil {
			return n, fmt.Errorf("snapshot: stage memory file: %w", err)
		}
	}
	return n, nil
}

// stageLayer extracts one layer into a new temporary directory and checks
// the stream against its digest and size. It returns the directory and the
// bytes of file content written.
func (s *Store) stageLayer(ctx context.Context, r io.Reader, l Layer, lim Limits) (string, int64, error) {
	tmp, err := s.Temp()
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(r, h)}
	n, xerr := extract(ctx, cr, tmp, lim)
	// Whatever the extractor left unread (tar padding) is part of the sum.
	if _, err := io.Copy(io.Discard, cr); err != nil && xerr == nil {
		xerr = fmt.Errorf("snapshot file is truncated in layer %s: %w", l.Digest, ErrChecksum)
	}
	if errors.Is(xerr, errdefs.ErrResourceExhausted) || errors.Is(xerr, ErrUnsafeArchive) {
		// Refused before writing the entry: what matters is the refusal,
		// whatever the checksum says.
		s.Discard(tmp)
		return "", n, xerr
	}
	if got := digestOf(h); got != l.Digest || cr.n != l.Size {
		s.Discard(tmp)
		return "", n, fmt.Errorf("layer %s does not match its checksum (corrupted, truncated or tampered file): %w", l.Digest, ErrChecksum)
	}
	if xerr != nil {
		s.Discard(tmp)
		return "", n, xerr
	}
	return tmp, n, nil
}

// Commit moves the staged layers into the store, lowest first, and returns
// the manifest with each layer's Added set. Nothing is kept of a file that
// fails: the layers it added are removed again. It holds each layer it
// has until it returns, so a concurrent collection keeps them; callers
// that record the snapshot serialise Commit and the record against their
// collector.
func (st *Staged) Commit(ctx context.Context) (*Manifest, error) {
	s := st.s
	defer st.Discard()
	m := st.m
	m.Layers = append([]Layer(nil), st.m.Layers...)
	var added []string
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	fail := func(err error) (*Manifest, error) {
		for _, r := range releases {
			r()
		}
		releases = nil
		for i := len(added) - 1; i >= 0; i-- {
			if rerr := s.removeLayer(added[i], nil); rerr != nil {
				s.log.Warn("remove a layer of a failed import", "layer", added[i], "err", rerr)
			}
		}
		if len(added) > 0 {
			if _, rerr := s.sweep(); rerr != nil {
				s.log.Warn("sweep the object pool after a failed import", "err", rerr)
			}
		}
		return nil, err
	}
	if len(st.tmps) != len(m.Layers) {
		return fail(errdefs.Invalid("snapshot import was discarded"))
	}
	var below []string
	for i, l := range m.Layers {
		tmp := st.tmps[i]
		st.tmps[i] = "" // CommitOn moves or removes it
		got, err := s.CommitOn(ctx, tmp, below)
		if got.Added > 0 {
			added = append(added, got.Digest)
		}
		if err != nil {
			return fail(err)
		}
		if got.Digest != l.Digest {
			// Same bytes in, different tree out: the layer tar was not in
			// canonical form, so its name would not describe its content.
			return fail(errdefs.Invalid("layer %s is not in canonical form", l.Digest))
		}
		release, err := s.Hold(got.Digest)
		if err != nil {
			return fail(err)
		}
		releases = append(releases, release)
		m.Layers[i].Added = got.Added
		below = append(below, l.Digest)
	}
	return &m, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
