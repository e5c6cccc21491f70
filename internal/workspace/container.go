package workspace

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// The container executor runs a command in a sandbox that holds a copy of
// the version's files at /workspace: the copy goes in as a tar
// (WriteTar), the command runs with exec, and the sandbox's /workspace
// comes back as a tar that is compared with the version (ChangesFromTar),
// so its changes land like any executor's. The sandbox's side (attach,
// sync, exec, detach when idle) is the controller's, which owns
// sandboxes; this file is what needs no sandbox.

// ContainerRun is one command for the container executor.
type ContainerRun struct {
	Workspace Record
	// Version and Entries are what the command sees.
	Version int64
	Entries []vfs.Entry
	Script  string
	Stdin   []byte
	Env     map[string]string
	Cwd     string
	Timeout time.Duration
}

// ContainerResult is what the container executor did.
type ContainerResult struct {
	ExitCode       int
	Stdout, Stderr []byte
	// Stopped is why the command was stopped ("timeout"); its changes
	// are then not kept.
	Stopped string
	Changes []vfs.Change
	// Landed is told the version the changes made (the one the command
	// saw when it changed nothing), or -1 when they did not land, so
	// the executor knows what its copy now holds.
	Landed func(version int64)
}

// ContainerFunc runs a command in a container (the controller's).
type ContainerFunc func(ctx context.Context, run ContainerRun) (*ContainerResult, error)

// WriteTar writes a version's files as a tar, names relative to the
// workspace's root, directories before what they hold.
func (s *Store) WriteTar(w io.Writer, entries []vfs.Entry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries { // sorted by path: parents first
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode.Perm()), ModTime: e.ModTime, Format: tar.FormatPAX}
		if e.Dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		b, err := s.Content(e.Hash)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(b))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// ChangesFromTar reads a container's copy of the workspace as a tar (from
// a sandbox: untrusted) and lists how it differs from the version it
// started as. A file whose content, mode and kind are the version's keeps
// the version's entry (a tar's times are not compared: a copy in and out
// changes them). What a workspace cannot hold (symlinks, devices, other
// kinds) is skipped and named in skipped. The tar is bounded by lim: past
// it, the result is a quota error and nothing lands.
func ChangesFromTar(r io.Reader, version []vfs.Entry, lim vfs.Limits) (changes []vfs.Change, skipped []string, err error) {
	old := make(map[string]vfs.Entry, len(version))
	for _, e := range version {
		old[e.Path] = e
	}
	seen := make(map[string]bool, len(version))
	dirs := map[string]bool{".": true}
	var bytes, entries int64
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read the container's copy of the workspace: %w", err)
		}
		name := strings.TrimSuffix(path.Clean(strings.TrimPrefix(hdr.Name, "./")), "/")
		if name == "." {
			continue
		}
		if !fs.ValidPath(name) || seen[name] {
			return nil, nil, fmt.Errorf("the container's copy of the workspace has a bad or repeated path %q: %w", truncate(hdr.Name, 128), errdefs.ErrInvalidArgument)
		}
		if !dirs[path.Dir(name)] {
			skipped = append(skipped, name)
			continue
		}
		e := vfs.Entry{Path: name, Mode: fs.FileMode(hdr.Mode).Perm(), ModTime: hdr.ModTime.UTC()}
		var data []byte
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Dir = true
			dirs[name] = true
		case tar.TypeReg:
			if hdr.Size > vfs.MaxFileSize {
				return nil, nil, fmt.Errorf("%s in the container is %d bytes, past the %d a workspace file may hold; nothing was kept: %w", name, hdr.Size, int64(vfs.MaxFileSize), errdefs.ErrResourceExhausted)
			}
			if lim.MaxBytes > 0 && bytes+hdr.Size > lim.MaxBytes {
				return nil, nil, fmt.Errorf("the container's copy of the workspace holds more than its quota of %d bytes; nothing was kept: %w", lim.MaxBytes, errdefs.ErrResourceExhausted)
			}
			data, err = io.ReadAll(io.LimitReader(tr, hdr.Size))
			if err != nil {
				return nil, nil, fmt.Errorf("read %s from the container: %w", name, err)
			}
			sum := sha256.Sum256(data)
			e.Hash, e.Size = hex.EncodeToString(sum[:]), int64(len(data))
			bytes += e.Size
		default:
			skipped = append(skipped, name)
			continue
		}
		entries++
		if lim.MaxEntries > 0 && entries > lim.MaxEntries {
			return nil, nil, fmt.Errorf("the container's copy of the workspace holds more than its quota of %d files and directories; nothing was kept: %w", lim.MaxEntries, errdefs.ErrResourceExhausted)
		}
		seen[name] = true
		o, had := old[name]
		switch {
		case had && o.Dir == e.Dir && o.Hash == e.Hash && o.Mode == e.Mode:
			continue // unchanged, whatever its times say
		case had && !e.Dir && o.Hash == e.Hash:
			data = nil // the version holds this content already
		}
		changes = append(changes, vfs.Change{Entry: e, Data: data})
	}
	for _, o := range version {
		if !seen[o.Path] {
			changes = append(changes, vfs.Change{Entry: vfs.Entry{Path: o.Path, Dir: o.Dir}, Removed: true})
		}
	}
	return changes, skipped, nil
}
