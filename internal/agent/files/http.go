package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/agent/users"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// entryJSON is envd's upload result entry.
type entryJSON struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (s *Service) handleDownload(w http.ResponseWriter, r *http.Request) {
	u, err := s.userFor(r.Context(), r.URL.Query().Get("username"))
	if err != nil {
		reply.Status(w, http.StatusUnauthorized, reply.Public(err))
		return
	}
	path, err := users.ResolvePath(u, r.URL.Query().Get("path"))
	if err != nil {
		reply.Error(w, err)
		return
	}
	f, fi, err := safefs.OpenRegular("open", path, os.O_RDONLY)
	if err != nil {
		reply.Error(w, err)
		return
	}
	defer f.Close()
	coding, ok := negotiateEncoding(strings.Join(r.Header.Values("Accept-Encoding"), ","))
	if !ok {
		reply.Status(w, http.StatusNotAcceptable, "no acceptable encoding found, supported: [identity, gzip]")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(path)}))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "Accept-Encoding")
	if coding == "gzip" && !rangeOrConditional(r) {
		serveGzip(w, r, f)
		return
	}
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

func (s *Service) handleUpload(w http.ResponseWriter, r *http.Request) {
	u, err := s.userFor(r.Context(), r.URL.Query().Get("username"))
	if err != nil {
		reply.Status(w, http.StatusUnauthorized, reply.Public(err))
		return
	}
	qpath := r.URL.Query().Get("path")
	md, err := parseMetadataHeaders(r.Header)
	if err != nil {
		reply.Error(w, err)
		return
	}
	body, release, err := uploadBody(r)
	if err != nil {
		reply.Error(w, err)
		return
	}
	defer release()
	// The server closes the original body itself; the multipart reader and
	// the raw path read the decoded one.
	r.Body = io.NopCloser(body)
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []entryJSON
	switch mediaType {
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil || params["boundary"] == "" {
			reply.Status(w, http.StatusBadRequest, "invalid multipart body")
			return
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				reply.Status(w, http.StatusBadRequest, "invalid multipart body")
				return
			}
			if part.FormName() != "file" {
				_ = part.Close()
				continue
			}
			e, err := s.uploadPart(u, qpath, part, md)
			_ = part.Close()
			if err != nil {
				reply.Error(w, err)
				return
			}
			written = append(written, e)
		}
	case "application/octet-stream", "":
		if qpath == "" {
			reply.Status(w, http.StatusBadRequest, "the path parameter is required for a raw upload")
			return
		}
		e, err := s.writeFile(u, qpath, r.Body, md)
		if err != nil {
			reply.Error(w, err)
			return
		}
		// Paddock's own extension: envd has no way to set the mode of an
		// uploaded file, and scripts need 0755.
		if m := r.URL.Query().Get("mode"); m != "" {
			mode, perr := strconv.ParseUint(m, 8, 32)
			if perr != nil || mode > 0o777 {
				reply.Status(w, http.StatusBadRequest, "mode must be octal permission bits, at most 0777")
				return
			}
			if err := os.Chmod(e.Path, os.FileMode(mode)); err != nil {
				reply.Error(w, safefs.Error("chmod", e.Path, err))
				return
			}
		}
		written = append(written, e)
	default:
		reply.Status(w, http.StatusUnsupportedMediaType, "upload must be multipart/form-data or application/octet-stream")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if written == nil {
		written = []entryJSON{}
	}
	_ = json.NewEncoder(w).Encode(written)
}

// uploadPart writes one multipart file: to the path parameter if given,
// else to the part's file name (relative names from the user's home).
func (s *Service) uploadPart(u *users.User, qpath string, part *multipart.Part, md map[string]string) (entryJSON, error) {
	target := qpath
	if target == "" {
		target = partFilePath(part)
		if target == "" {
			return entryJSON{}, errdefs.Invalid("a file part needs a path parameter or a file name")
		}
	}
	return s.writeFile(u, target, part, md)
}

// partFilePath is the part's file name as sent, directories included:
// Part.FileName keeps only the base name, but the SDKs' writeFiles name
// each part by its full path, as envd expects.
func partFilePath(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// writeFile replaces the content of the file at p with r's, creating
// missing parents, everything new owned by u. It writes in place, as envd
// does, so watchers see one create (or write) of the file itself; a symlink
// at p is replaced, never written through. md replaces the file's metadata
// before any content is written, so a file system that cannot hold it
// fails the upload before a large body is streamed.
func (s *Service) writeFile(u *users.User, p string, r io.Reader, md map[string]string) (entryJSON, error) {
	path, err := users.ResolvePath(u, p)
	if err != nil {
		return entryJSON{}, err
	}
	if path == "/" {
		return entryJSON{}, errdefs.Invalid("cannot write to /")
	}
	fi, err := os.Lstat(path)
	existed := err == nil && fi.Mode().IsRegular()
	switch {
	case err == nil && fi.IsDir():
		return entryJSON{}, fmt.Errorf("%s is a directory: %w", path, errdefs.ErrConflict)
	case err == nil && !fi.Mode().IsRegular():
		if err := os.Remove(path); err != nil {
			return entryJSON{}, safefs.Error("replace", path, err)
		}
	}
	if err := mkdirAllOwned(filepath.Dir(path), u); err != nil {
		return entryJSON{}, err
	}
	// Truncated only once the metadata is in place, so an upload refused
	// for its metadata leaves an existing file as it was.
	// Non-blocking and checked after the open: a pipe put in place since
	// the Lstat above must be refused, not block this thread.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return entryJSON{}, safefs.OpenError("create", path, err)
	}
	if _, err := safefs.CheckRegular(f, path); err != nil {
		return entryJSON{}, err
	}
	if err := setMetadata(f, md); err != nil {
		_ = f.Close()
		if !existed {
			_ = os.Remove(path)
		}
		return entryJSON{}, err
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return entryJSON{}, safefs.Error("write", path, err)
	}
	// Owned by u before the first byte, so a watcher's entry for the write
	// already shows the final owner; through the descriptor, so a path
	// swapped meanwhile is not what gets chowned.
	if os.Geteuid() == 0 {
		if err := f.Chown(int(u.UID), int(u.GID)); err != nil {
			_ = f.Close()
			return entryJSON{}, safefs.Error("chown", path, err)
		}
	}
	if _, err := io.Copy(f, bodyReader{r}); err != nil {
		_ = f.Close()
		var be bodyError
		if errors.As(err, &be) {
			return entryJSON{}, errdefs.Invalid("upload body could not be read: %v", be.err)
		}
		return entryJSON{}, safefs.Error("write", path, err)
	}
	if err := f.Close(); err != nil {
		return entryJSON{}, safefs.Error("write", path, err)
	}
	return entryJSON{Path: path, Name: filepath.Base(path), Type: "file", Metadata: md}, nil
}

// bodyError marks a failure to read the upload, as opposed to a failure to
// write it to disk: the first is the client's, the second the sandbox's.
type bodyError struct{ err error }

func (e bodyError) Error() string { return e.err.Error() }

type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = bodyError{err}
	}
	return n, err
}
