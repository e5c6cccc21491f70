// Package memimage seals and checks a sandbox's memory image: the
// directory of files a runtime's checkpoint writes (gVisor's checkpoint,
// pages and page metadata). Sealing syncs every file to disk and records
// its size and SHA-256, with the format the runtime needs to restore it,
// in a manifest written last; checking reads it all back before a
// restore, so a damaged, partial or foreign image is refused by name and
// never half restored.
package memimage

import (
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// ManifestName is the manifest's file in an image directory.
const ManifestName = "paddock-memory.json"

// maxManifest bounds the manifest read back.
const maxManifest = 64 << 10

// maxFiles bounds the files of one image (gVisor writes three).
const maxFiles = 64

// ErrDamaged marks an image that is incomplete or whose files changed
// since it was sealed. It is a failed precondition: the image cannot be
// used, and trying again will not help.
var ErrDamaged = fmt.Errorf("memory image damaged: %w", errdefs.ErrFailedPrecondition)

// Manifest describes a sealed image.
type Manifest struct {
	// Format names what can restore the image ("runsc <version>").
	Format   string    `json:"format"`
	SealedAt time.Time `json:"sealed_at"`
	Files    []File    `json:"files"`
}

// File is one file of an image.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Bytes is the image's size on disk, its files summed.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Seal syncs the files in dir, hashes them and writes the manifest, last
// and atomically: a directory without one was never sealed. Anything in
// dir but regular files is refused.
func Seal(dir, format string, now time.Time) (Manifest, error) {
	return (*Verified)(nil).Seal(dir, format, now)
}

// Seal is the package's Seal, remembering the hashes it takes.
func (v *Verified) Seal(dir, format string, now time.Time) (Manifest, error) {
	if format == "" {
		return Manifest{}, errdefs.Invalid("memimage: empty format")
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("memimage: %w", err)
	}
	m := Manifest{Format: format, SealedAt: now.UTC()}
	for _, e := range ents {
		if e.Name() == ManifestName {
			return Manifest{}, fmt.Errorf("memimage: %s is sealed already: %w", dir, errdefs.ErrConflict)
		}
		if !e.Type().IsRegular() {
			return Manifest{}, fmt.Errorf("memimage: %s in the image is not a regular file: %w", e.Name(), ErrDamaged)
		}
		if len(m.Files) == maxFiles {
			return Manifest{}, fmt.Errorf("memimage: more than %d files: %w", maxFiles, ErrDamaged)
		}
		f, err := v.hashFile(filepath.Join(dir, e.Name()), true)
		if err != nil {
			return Manifest{}, err
		}
		f.Name = e.Name()
		m.Files = append(m.Files, f)
	}
	if len(m.Files) == 0 {
		return Manifest{}, fmt.Errorf("memimage: %s holds no files: %w", dir, ErrDamaged)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	tmp := filepath.Join(dir, ManifestName+".tmp")
	if err := writeSync(tmp, b); err != nil {
		return Manifest{}, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestName)); err != nil {
		return Manifest{}, fmt.Errorf("memimage: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Read returns dir's manifest without checking the files.
func Read(dir string) (Manifest, error) {
	f, err := os.OpenFile(filepath.Join(dir, ManifestName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("memimage: no manifest (the image was never finished): %w", ErrDamaged)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("memimage: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("memimage: %w", err)
	}
	var m Manifest
	if len(b) > maxManifest || json.Unmarshal(b, &m) != nil || m.Format == "" || len(m.Files) == 0 || len(m.Files) > maxFiles {
		return Manifest{}, fmt.Errorf("memimage: unreadable manifest: %w", ErrDamaged)
	}
	for _, f := range m.Files {
		if !validName(f.Name) {
			return Manifest{}, fmt.Errorf("memimage: manifest names %q: %w", f.Name, ErrDamaged)
		}
	}
	return m, nil
}

// Check verifies that dir holds a sealed image of format: the manifest,
// exactly its files, each of its size and hash. A different format is
// refused naming both.
func Check(dir, format string) (Manifest, error) {
	return (*Verified)(nil).Check(dir, format)
}

// Check is the package's Check, taking from v the hash of a file v hashed
// before and that has not changed since (Verified says how that is told).
func (v *Verified) Check(dir, format string) (Manifest, error) {
	m, err := Read(dir)
	if err != nil {
		return Manifest{}, err
	}
	if m.Format != format {
		return Manifest{}, fmt.Errorf("the memory image was made by %s and this daemon runs %s, which cannot restore it: %w", m.Format, format, errdefs.ErrFailedPrecondition)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("memimage: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != ManifestName {
			names = append(names, e.Name())
		}
	}
	for _, f := range m.Files {
		if !slices.Contains(names, f.Name) {
			return Manifest{}, fmt.Errorf("memimage: %s is missing: %w", f.Name, ErrDamaged)
		}
		got, err := v.hashFile(filepath.Join(dir, f.Name), false)
		if err != nil {
			return Manifest{}, err
		}
		if got.Size != f.Size || got.SHA256 != f.SHA256 {
			return Manifest{}, fmt.Errorf("memimage: %s changed since it was written (%d bytes, sealed at %d): %w", f.Name, got.Size, f.Size, ErrDamaged)
		}
	}
	if len(names) != len(m.Files) {
		return Manifest{}, fmt.Errorf("memimage: %d files where the manifest names %d: %w", len(names), len(m.Files), ErrDamaged)
	}
	return m, nil
}

func validName(n string) bool {
	return n != "" && n != "." && n != ".." && n != ManifestName && filepath.Base(n) == n && len(n) <= 255
}

// hashFile hashes a regular file (never following a symlink), syncing it
// first if asked; v gives the hash of a file it hashed before that has not
// changed since, and remembers the hash of one read unchanged.
func (v *Verified) hashFile(path string, sync bool) (File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return File{}, fmt.Errorf("memimage: %s is a symlink: %w", filepath.Base(path), ErrDamaged)
		}
		return File{}, fmt.Errorf("memimage: %w", err)
	}
	defer f.Close()
	var before unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &before); err != nil {
		return File{}, fmt.Errorf("memimage: %w", err)
	}
	if before.Mode&unix.S_IFMT != unix.S_IFREG {
		return File{}, fmt.Errorf("memimage: %s is not a regular file: %w", filepath.Base(path), ErrDamaged)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return File{}, fmt.Errorf("memimage: sync %s: %w", filepath.Base(path), err)
		}
	}
	if sum, ok := v.lookup(&before); ok {
		return File{Size: before.Size, SHA256: sum}, nil
	}
	if v != nil {
		v.reads.Add(1)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("memimage: read %s: %w", filepath.Base(path), err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	// Remembered only if nothing wrote to the file while it was read.
	var after unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &after); err == nil && after.Size == n {
		_, b := stampOf(&before)
		if _, a := stampOf(&after); a == b {
			v.remember(&after, sum)
		}
	}
	return File{Size: n, SHA256: sum}, nil
}

func writeSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("memimage: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("memimage: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("memimage: %w", err)
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("memimage: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("memimage: sync %s: %w", dir, err)
	}
	return nil
}
