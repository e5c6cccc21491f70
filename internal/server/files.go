package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// fileRef is the file a request names: the sandbox in the path, the file
// and user in the query.
func fileRef(r *http.Request) controller.FileRef {
	q := r.URL.Query()
	return controller.FileRef{Sandbox: r.PathValue("id"), Path: q.Get("path"), User: q.Get("user")}
}

// headerOnce delays the response header until the first body byte, so an
// error before any data still becomes a proper error response.
type headerOnce struct {
	w           http.ResponseWriter
	contentType string
	wrote       bool
}

func (h *headerOnce) Write(p []byte) (int, error) {
	if !h.wrote {
		h.wrote = true
		h.w.Header().Set("Content-Type", h.contentType)
		h.w.WriteHeader(http.StatusOK)
	}
	return h.w.Write(p)
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	s.streamOut(w, r, "read file", "application/octet-stream", s.opts.Controller.ReadFile)
}

func (s *Server) tarOut(w http.ResponseWriter, r *http.Request) {
	s.streamOut(w, r, "tar out", "application/x-tar", s.opts.Controller.TarOut)
}

// streamOut answers with what fn writes: an error before the first byte
// is an error answer, one after it cuts the transfer (abortStream).
func (s *Server) streamOut(w http.ResponseWriter, r *http.Request, what, contentType string, fn func(context.Context, controller.FileRef, io.Writer) error) {
	hw := &headerOnce{w: w, contentType: contentType}
	err := fn(r.Context(), fileRef(r), hw)
	switch {
	case err != nil && !hw.wrote:
		writeError(w, err)
	case err != nil:
		s.abortStream(what, err)
	case !hw.wrote:
		hw.Write(nil) // an empty file is still a 200
	}
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	mode, err := queryMode(r)
	if err != nil {
		writeError(w, err)
		return
	}
	fi, err := s.opts.Controller.WriteFile(r.Context(), fileRef(r), mode, r.Body)
	answerFile(w, fi, err)
}

// queryMode reads the mode parameter: octal permission bits, 0 when
// absent.
func queryMode(r *http.Request) (os.FileMode, error) {
	m := r.URL.Query().Get("mode")
	if m == "" {
		return 0, nil
	}
	mode, err := strconv.ParseUint(m, 8, 32)
	if err != nil || mode > 0o777 {
		return 0, errdefs.Invalid("mode %q: want octal permission bits such as 0644 or 0755", m)
	}
	return os.FileMode(mode), nil
}

// answerFile answers with a file's description, or the error.
func answerFile(w http.ResponseWriter, fi api.FileInfo, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fi)
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Controller.RemoveFile(r.Context(), fileRef(r)); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	entries, err := s.opts.Controller.ListDir(r.Context(), fileRef(r))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FileList{Entries: entries})
}

func (s *Server) stat(w http.ResponseWriter, r *http.Request) {
	fi, err := s.opts.Controller.StatFile(r.Context(), fileRef(r))
	answerFile(w, fi, err)
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request) {
	var req api.PathRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	f := fileRef(r)
	f.Path = req.Path
	fi, err := s.opts.Controller.MakeDir(r.Context(), f)
	answerFile(w, fi, err)
}

func (s *Server) move(w http.ResponseWriter, r *http.Request) {
	var req api.MoveRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	f := fileRef(r)
	f.Path = req.Destination
	fi, err := s.opts.Controller.MoveFile(r.Context(), f, req.Source)
	answerFile(w, fi, err)
}

func (s *Server) tarIn(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Controller.TarIn(r.Context(), fileRef(r), r.Body); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) exportLayer(w http.ResponseWriter, r *http.Request) {
	hw := &headerOnce{w: w, contentType: "application/x-tar"}
	err := s.opts.Controller.ExportLayer(r.Context(), r.PathValue("id"), hw)
	switch {
	case err != nil && !hw.wrote:
		writeError(w, err)
	case err != nil:
		s.abortStream("layer export", err)
	case !hw.wrote:
		hw.Write(nil)
	}
}

var _ io.Writer = (*headerOnce)(nil)

// abortStream ends a response whose body was already under way: the
// connection is cut (no clean end of a chunked body), so the client sees a
// failed transfer instead of a short file that looks complete.
func (s *Server) abortStream(what string, err error) {
	s.log.Warn(what+" failed mid-stream", "err", err)
	panic(http.ErrAbortHandler)
}
