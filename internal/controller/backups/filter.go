package backups

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Bounds on backup excludes.
const (
	maxExcludes       = 64
	maxExcludePattern = 256
)

// validateExcludes checks glob patterns before any work starts, so a typo
// is a clear error instead of a silently unfiltered archive.
func validateExcludes(patterns []string) error {
	if len(patterns) > maxExcludes {
		return errdefs.Invalid("%d exclude patterns, at most %d", len(patterns), maxExcludes)
	}
	for _, p := range patterns {
		if p == "" || len(p) > maxExcludePattern || strings.ContainsRune(p, 0) {
			return errdefs.Invalid("exclude pattern %q: want 1-%d bytes without NUL", p, maxExcludePattern)
		}
		if strings.HasPrefix(p, "/") {
			return errdefs.Invalid("exclude pattern %q: patterns are relative to the backed-up directory; drop the leading '/'", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return errdefs.Invalid("exclude pattern %q is not a valid glob: %v", p, err)
		}
	}
	return nil
}

// excluded reports whether the archive entry name (relative to the backed-up
// directory) is dropped: a pattern without '/' matches any one path element,
// so "node_modules" drops every such directory and all under it; a pattern
// with '/' matches the relative path or any of its leading parts.
func excluded(name string, patterns []string) bool {
	name = strings.Trim(path.Clean("/"+name), "/")
	if name == "" {
		return false
	}
	parts := strings.Split(name, "/")
	for _, p := range patterns {
		if strings.Contains(p, "/") {
			p = strings.Trim(p, "/")
			for i := range parts {
				if ok, _ := path.Match(p, strings.Join(parts[:i+1], "/")); ok {
					return true
				}
			}
			continue
		}
		for _, el := range parts {
			if ok, _ := path.Match(p, el); ok {
				return true
			}
		}
	}
	return false
}

// errBackupTooLarge is returned when a directory holds more than a backup
// may take.
var errBackupTooLarge = errors.New("backup too large")

// filterTar copies the tar stream r to w without the excluded entries,
// refusing more than maxBytes of content. Entries are copied as read; the
// archive is checked again (names, links, devices) when it is restored,
// by the agent that extracts it.
func filterTar(r io.Reader, w io.Writer, patterns []string, maxBytes int64) (entries int, err error) {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return entries, fmt.Errorf("read the directory archive: %w", err)
		}
		if excluded(hdr.Name, patterns) {
			continue
		}
		if hdr.Size < 0 {
			return entries, fmt.Errorf("archive entry %q has a negative size", hdr.Name)
		}
		total += hdr.Size
		if total > maxBytes {
			return entries, fmt.Errorf("%w: the directory holds more than %d bytes", errBackupTooLarge, maxBytes)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return entries, fmt.Errorf("write archive entry %q: %w", hdr.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return entries, fmt.Errorf("copy archive entry %q: %w", hdr.Name, err)
		}
		entries++
	}
	return entries, tw.Close()
}
