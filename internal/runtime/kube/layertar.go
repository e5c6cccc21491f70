package kube

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/tarsafe"
)

// A snapshot on this backend is the home directory: the part of a
// sandbox a stop keeps (its PersistentVolumeClaim). It is stored as an
// overlay-format layer like a local sandbox's writable layer, with the
// files under home/user/, so the snapshot store, export and import treat
// it like any other layer.
const (
	// homeLayerDir is the home directory's path inside a layer.
	homeLayerDir = "home/user"
	// homeUID and homeGID own the home directory in Paddock's images
	// (the default user, "user"); the agent gives a fresh home volume to
	// that user.
	homeUID, homeGID = 1000, 1000
	// maxSnapshotEntries bounds the entries of one home snapshot, as the
	// agent bounds one tar upload.
	maxSnapshotEntries = 1 << 20
)

// Overlay's marker of an opaque directory, as the snapshot store keeps
// it in a PAX record.
const (
	paxXattrPrefix = "SCHILY.xattr."
	opaqueRecord   = paxXattrPrefix + "trusted.overlay.opaque"
)

// errLayerDone ends the writer of a stream whose reader has stopped.
var errLayerDone = errors.New("layer extraction ended")

// homeLayer reads r, the agent's tar of the home directory (names
// relative to it), and extracts it into dst, an empty host directory, as
// an overlay-format layer: home/ (root's), home/user/ (the default
// user's, marked opaque because the copy is the whole directory, so an
// image's own files there stay hidden wherever the layer is stacked), and
// every entry under home/user/. The stream is untrusted: only
// directories, regular files and symlinks are taken, each entry's header
// is rebuilt from its name, type, mode, owner, time, size and link target
// (extended attributes the stream may carry are dropped), and
// snapshot.Extract refuses unsafe names, symlinks on the way, repeated
// paths and anything over lim.
func homeLayer(ctx context.Context, r io.Reader, dst string, lim snapshot.Limits) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := snapshot.Extract(ctx, pr, dst, lim)
		pr.CloseWithError(errLayerDone)
		done <- err
	}()
	werr := rewriteHome(r, pw, time.Now())
	pw.CloseWithError(werr)
	xerr := <-done
	if werr != nil && !errors.Is(werr, errLayerDone) {
		return werr
	}
	return xerr
}

// rewriteHome writes r's entries to w with names under home/user/,
// preceded by the layer's home/ and home/user/ directories.
func rewriteHome(r io.Reader, w io.Writer, now time.Time) error {
	tw := tar.NewWriter(w)
	top := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "home/", Mode: 0o755, ModTime: now, Format: tar.FormatPAX},
		{Typeflag: tar.TypeDir, Name: homeLayerDir + "/", Mode: 0o755, Uid: homeUID, Gid: homeGID, ModTime: now,
			PAXRecords: map[string]string{opaqueRecord: "y"}, Format: tar.FormatPAX},
	}
	for _, h := range top {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("the agent's tar of %s is truncated or corrupt: %v: %w", homePath, err, errdefs.ErrUnavailable)
		}
		if tarsafe.Sparse(hdr) {
			return fmt.Errorf("the agent's tar of %s holds a sparse file %q: %w", homePath, truncate(hdr.Name, 200), snapshot.ErrUnsafeArchive)
		}
		out, ok := cleanHeader(hdr, homeLayerDir+"/"+hdr.Name)
		if !ok {
			return fmt.Errorf("the agent's tar of %s holds %q of type %q, which a home directory snapshot does not take: %w",
				homePath, truncate(hdr.Name, 200), hdr.Typeflag, snapshot.ErrUnsafeArchive)
		}
		if err := tw.WriteHeader(out); err != nil {
			return fmt.Errorf("snapshot entry %q: %w", truncate(hdr.Name, 200), err)
		}
		if out.Size > 0 {
			if _, err := io.Copy(tw, tr); err != nil {
				if errors.Is(err, errLayerDone) {
					return err
				}
				return fmt.Errorf("the agent's tar of %s is cut short in %q: %v: %w", homePath, truncate(hdr.Name, 200), err, errdefs.ErrUnavailable)
			}
		}
	}
	return tw.Close()
}

// deletion is one removal a layer asks of what lies below it, as a path
// inside the sandbox.
type deletion struct {
	Path string
	// Contents: remove what the directory holds, not the directory (an
	// opaque directory, or the home directory itself, which is a mount
	// point on this backend).
	Contents bool
}

// homeSplit is what splitHomeLayer found in one layer.
type homeSplit struct {
	// Deletions, in the layer's order (parents before children).
	Deletions []deletion
	// Outside counts the entries outside the home directory (a snapshot
	// taken on the local backend holds the whole writable layer); they
	// are left out.
	Outside int
}

// splitHomeLayer reads r, an overlay-format layer as snapshot.WriteTree
// writes it, and splits what lies under home/user: whiteouts (0/0
// character devices) and opaque directories become deletions, and, when w
// is not nil, the directories, regular files and symlinks go to w as a
// tar with names relative to the home directory, headers rebuilt with
// name, type, mode, owner, time, size and link target only (extended
// attributes are not written into the sandbox). The home directory's own
// entry is never written: the directory stays as the agent made it, the
// default user's.
func splitHomeLayer(r io.Reader, w io.Writer) (homeSplit, error) {
	var out homeSplit
	var tw *tar.Writer
	if w != nil {
		tw = tar.NewWriter(w)
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read snapshot layer: %w", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		opaque := hdr.Typeflag == tar.TypeDir && hdr.PAXRecords[opaqueRecord] == "y"
		whiteout := hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0
		rel, inHome := strings.CutPrefix(name, homeLayerDir+"/")
		switch {
		case name == "home" && whiteout, name == homeLayerDir && (whiteout || opaque):
			// The home directory (or /home) was removed or replaced: on
			// this backend it is a mount point, so its contents go.
			out.Deletions = append(out.Deletions, deletion{Path: homePath, Contents: true})
			continue
		case name == "home" || name == homeLayerDir:
			continue
		case !inHome:
			out.Outside++
			continue
		}
		if path.Clean(rel) != rel || rel == "." || strings.HasPrefix(rel, "../") || rel == ".." {
			return out, fmt.Errorf("snapshot layer entry %q: %w", truncate(hdr.Name, 200), snapshot.ErrUnsafeArchive)
		}
		target := homePath + "/" + rel
		switch {
		case whiteout:
			out.Deletions = append(out.Deletions, deletion{Path: target})
			continue
		case opaque:
			out.Deletions = append(out.Deletions, deletion{Path: target, Contents: true})
		}
		o, ok := cleanHeader(hdr, rel)
		if !ok {
			return out, fmt.Errorf("snapshot layer entry %q has type %q: %w", truncate(hdr.Name, 200), hdr.Typeflag, snapshot.ErrUnsafeArchive)
		}
		if tw == nil {
			continue
		}
		if err := tw.WriteHeader(o); err != nil {
			return out, err
		}
		if o.Size > 0 {
			if _, err := io.Copy(tw, tr); err != nil {
				return out, err
			}
		}
	}
	if tw != nil {
		return out, tw.Close()
	}
	return out, nil
}

// firstHomeLayer returns the index of the lowest layer that matters for
// the home directory: the highest that clears it whole (every snapshot
// taken on this backend does: its home is opaque), since the layers below
// it only write what it removes.
func firstHomeLayer(splits []homeSplit) int {
	for i := len(splits) - 1; i >= 0; i-- {
		for _, d := range splits[i].Deletions {
			if d.Path == homePath && d.Contents {
				return i
			}
		}
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// cleanHeader is a fresh header for hdr's entry under name, carrying only
// its type, permission bits, owner, time, size and link target: nothing
// else a stream may put in a header (attributes, device numbers) passes.
// ok is false for any type but a directory, regular file or symlink.
func cleanHeader(hdr *tar.Header, name string) (_ *tar.Header, ok bool) {
	out := &tar.Header{
		Typeflag: hdr.Typeflag,
		Name:     name,
		Mode:     hdr.Mode & 0o7777,
		Uid:      hdr.Uid,
		Gid:      hdr.Gid,
		ModTime:  hdr.ModTime,
		Format:   tar.FormatPAX,
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if !strings.HasSuffix(out.Name, "/") {
			out.Name += "/"
		}
	case tar.TypeReg:
		out.Size = hdr.Size
	case tar.TypeSymlink:
		out.Linkname = hdr.Linkname
	default:
		return nil, false
	}
	return out, true
}
