package controller

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/memimage"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/store"
)

// An exported memory snapshot carries its memory image after its layers.
// A memory image is the whole state of a gVisor sandbox's kernel, which
// runsc restore trusts as its own: one written by anyone else could hand
// the sentry any state it likes. So an image is exported with a seal, an
// HMAC-SHA256 over its description and every file's hash under a key of
// the daemon (<state>/memory-export.key, made on first use), and imported
// only when the seal verifies under the importing daemon's key: a file
// exported by this daemon, or by one whose key file was copied to it. Any
// other file can still be imported with FilesOnly, keeping its files.

// MemoryKeyFile is the memory export key's file in the state directory.
const MemoryKeyFile = "memory-export.key"

// memoryKeyMu serialises making the key within one process; O_EXCL does
// across processes.
var memoryKeyMu sync.Mutex

// memoryKey returns the daemon's memory export key, made if absent.
func (c *Controller) memoryKey() ([]byte, error) {
	memoryKeyMu.Lock()
	defer memoryKeyMu.Unlock()
	p := filepath.Join(c.cfg.StateDir, MemoryKeyFile)
	for range 2 {
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, 1024))
			if err != nil {
				return nil, fmt.Errorf("memory export key: %w", err)
			}
			b = bytes.TrimSpace(b)
			if len(b) < 32 {
				return nil, fmt.Errorf("memory export key %s is shorter than 32 bytes: %w", MemoryKeyFile, errdefs.ErrFailedPrecondition)
			}
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("memory export key: %w", err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		// Hex, so that it can be copied between hosts as text.
		if err := writeFileSync(p, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("memory export key: %w", err)
		}
	}
	return nil, fmt.Errorf("memory export key %s could not be made: %w", MemoryKeyFile, errdefs.ErrFailedPrecondition)
}

// writeFileSync creates path (which must not exist) with b, synced.
func writeFileSync(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// memoryMeta is what an exported memory image says of itself, inside its
// seal: what restores it, at which size, on which files.
type memoryMeta struct {
	Runtime     string        `json:"runtime"`
	Format      string        `json:"format"`
	Resources   api.Resources `json:"resources"`
	ImageDigest string        `json:"image_digest"`
	Layers      []string      `json:"layers"`
}

// memorySeal is the HMAC of an image's meta (compacted: the file's
// manifest is indented) and files under key.
func memorySeal(key, meta []byte, files []snapshot.MemoryFile) string {
	var compact bytes.Buffer
	if err := json.Compact(&compact, meta); err != nil {
		compact.Reset()
		compact.Write(meta)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("paddock memory export v1\x00"))
	mac.Write(compact.Bytes())
	for _, f := range files {
		fmt.Fprintf(mac, "\x00%s\x00%d\x00%s", f.Name, f.Size, f.SHA256)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// exportMemory describes s's memory image into m and returns the
// directory its files are read from.
func (c *Controller) exportMemory(s *store.Snapshot, m *snapshot.Manifest) (string, error) {
	key, err := c.memoryKey()
	if err != nil {
		return "", err
	}
	dir := c.snapshotMemoryDir(s.ID)
	im, err := memimage.Read(dir)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", s.ID, err)
	}
	var files []snapshot.MemoryFile
	for _, f := range im.Files {
		files = append(files, snapshot.MemoryFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
	}
	// The image's own manifest travels too, so the importer checks the
	// image as a sealed one.
	mf, err := hashRegular(filepath.Join(dir, memimage.ManifestName))
	if err != nil {
		return "", fmt.Errorf("snapshot %s: memory image: %w", s.ID, err)
	}
	mf.Name = memimage.ManifestName
	files = append(files, mf)
	meta := memoryMeta{Runtime: s.Memory.Runtime, Format: s.Memory.Format, Resources: s.Memory.Resources, ImageDigest: s.ImageDigest}
	for _, l := range s.Layers {
		meta.Layers = append(meta.Layers, l.Digest)
	}
	mb, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	m.Memory = &snapshot.MemoryImage{Meta: mb, Files: files, Seal: memorySeal(key, mb, files)}
	return dir, nil
}

func hashRegular(path string) (snapshot.MemoryFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return snapshot.MemoryFile{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return snapshot.MemoryFile{}, err
	}
	return snapshot.MemoryFile{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// memoryImportDir is where imports stage memory images, on the file
// system of the snapshots' own.
func (c *Controller) memoryImportDir() string {
	return filepath.Join(c.cfg.StateDir, "memory-import")
}

// newMemoryStage makes an empty directory for one import's memory image.
func (c *Controller) newMemoryStage() (string, error) {
	if err := os.MkdirAll(c.memoryImportDir(), 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(c.memoryImportDir(), "import-")
}

// removeMemoryStages removes what interrupted imports left; run before
// the API serves.
func (c *Controller) removeMemoryStages() {
	if err := os.RemoveAll(c.memoryImportDir()); err != nil {
		c.log.Warn("remove interrupted memory imports", "err", err)
	}
}

// acceptMemory checks an imported memory image, staged in dir, against
// this daemon's key and runtime, and returns what the snapshot records.
func (c *Controller) acceptMemory(m *snapshot.Manifest, dir string) (*store.SnapshotMemory, error) {
	const filesOnly = "; import the file with files_only (paddock snapshot import --files-only) to keep its files"
	key, err := c.memoryKey()
	if err != nil {
		return nil, err
	}
	want := memorySeal(key, m.Memory.Meta, m.Memory.Files)
	if !hmac.Equal([]byte(want), []byte(m.Memory.Seal)) {
		return nil, fmt.Errorf("the memory image in this file was not exported by this daemon or one sharing its key (%s in the state directory), and a memory image is restored only from a trusted source%s: %w", MemoryKeyFile, filesOnly, errdefs.ErrFailedPrecondition)
	}
	var meta memoryMeta
	dec := json.NewDecoder(bytes.NewReader(m.Memory.Meta))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&meta); err != nil {
		return nil, errdefs.Invalid("memory image description: %v", err)
	}
	var layers []string
	for _, l := range m.Layers {
		layers = append(layers, l.Digest)
	}
	if meta.ImageDigest != m.ImageDigest || !slices.Equal(meta.Layers, layers) {
		return nil, errdefs.Invalid("the memory image in this file belongs to other files than the file's layers")
	}
	cp, err := c.checkpointer(&store.Sandbox{ID: "(import)", Runtime: meta.Runtime})
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, filesOnly)
	}
	if f := cp.CheckpointFormat(); f != meta.Format {
		return nil, fmt.Errorf("the memory image in this file was made by %s and this daemon runs %s, which cannot restore it%s: %w", meta.Format, f, filesOnly, errdefs.ErrFailedPrecondition)
	}
	im, err := c.memOK.Check(dir, meta.Format)
	if err != nil {
		return nil, err
	}
	return &store.SnapshotMemory{Runtime: meta.Runtime, Format: meta.Format, Bytes: im.Bytes(), Resources: meta.Resources}, nil
}

// memoryImport is an import's staged memory image: the directory it goes
// to ("" when the import keeps files only).
type memoryImport struct {
	c   *Controller
	dir string
}

func (c *Controller) stageMemoryImport(filesOnly bool) (*memoryImport, error) {
	mi := &memoryImport{c: c}
	if filesOnly {
		return mi, nil
	}
	dir, err := c.newMemoryStage()
	if err != nil {
		return nil, fmt.Errorf("memory import: %w", err)
	}
	mi.dir = dir
	return mi, nil
}

// keep moves the staged image to snapshot id's directory.
func (mi *memoryImport) keep(id string) error {
	dst := mi.c.snapshotMemoryDir(id)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.Rename(mi.dir, dst); err != nil {
		return err
	}
	mi.dir = ""
	return nil
}

// discard removes whatever is still staged.
func (mi *memoryImport) discard() {
	if mi.dir != "" {
		_ = os.RemoveAll(mi.dir)
	}
}
