package files

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/agent/tree"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// handleTreeOut serves tree.Path.
func (s *Service) handleTreeOut(w http.ResponseWriter, r *http.Request) {
	before, err := strconv.ParseInt(r.URL.Query().Get("unchanged_before"), 10, 64)
	if err != nil || before < 0 {
		reply.Error(w, errdefs.Invalid("unchanged_before must be a time in nanoseconds since 1970"))
		return
	}
	dir, real, ok := s.outDir(w, r)
	if !ok {
		return
	}
	w.Header().Set(tree.WalkStartHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	if err := writeTree(r.Context(), w, real, before); err != nil {
		s.log.Debug("tree out aborted", "path", dir, "err", err)
		panic(http.ErrAbortHandler) // as for a tar: never a cut-short stream
	}
}

// writeTree writes dir's tree as a tree stream, names relative to it.
// Symlinks are never followed; they, sockets, devices and fifos are named
// as KindOther. A file changed before before comes as KindUnchanged.
func writeTree(ctx context.Context, w io.Writer, dir string, before int64) error {
	tw, err := tree.NewWriter(w)
	if err != nil {
		return err
	}
	err = walkLive(ctx, dir, func(p, rel string, fi fs.FileInfo) error {
		rec := tree.Record{Path: filepath.ToSlash(rel), Kind: tree.KindOther}
		if len(rec.Path) > tree.MaxPath {
			return nil
		}
		rec.Mode, rec.Mtime = fi.Mode().Perm(), fi.ModTime().UnixNano()
		switch {
		case fi.IsDir():
			rec.Kind = tree.KindDir
		case fi.Mode().IsRegular():
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			rec.Ino, rec.Ctime, rec.Size = st.Ino, st.Ctim.Nano(), fi.Size()
			if rec.Ctime < before {
				rec.Kind = tree.KindUnchanged
				break
			}
			// Non-blocking and checked again: a file swapped for a pipe
			// since the walk saw it is named, not waited on.
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
			if err != nil {
				return nil
			}
			if _, err := safefs.CheckRegular(f, p); err != nil {
				return tw.Write(tree.Record{Kind: tree.KindOther, Path: rec.Path}, nil)
			}
			defer f.Close()
			rec.Kind = tree.KindFile
			return tw.Write(rec, f)
		}
		return tw.Write(rec, nil)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
