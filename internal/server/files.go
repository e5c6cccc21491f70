package server

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

const maxPath = 4096

// withAgent resolves the sandbox (starting it if stopped), validates the
// path and user query parameters, and runs fn with the sandbox's agent.
func (s *Server) withAgent(w http.ResponseWriter, r *http.Request, needPath bool, fn func(ag *client.Client, path, user string) error) {
	q := r.URL.Query()
	path, user := q.Get("path"), q.Get("user")
	if needPath && path == "" {
		writeError(w, errdefs.Invalid("the path query parameter is required"))
		return
	}
	if len(path) > maxPath || strings.ContainsRune(path, 0) {
		writeError(w, errdefs.Invalid("path is longer than %d bytes or contains NUL", maxPath))
		return
	}
	if len(user) > 32 || strings.ContainsAny(user, ":\x00/") {
		writeError(w, errdefs.Invalid("user %q is not a valid user name", user))
		return
	}
	ag, _, done, err := s.opts.Controller.Agent(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	if err := fn(ag, path, user); err != nil {
		writeError(w, err)
	}
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
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		hw := &headerOnce{w: w, contentType: "application/octet-stream"}
		if err := ag.ReadFile(r.Context(), path, user, hw); err != nil {
			if hw.wrote {
				s.abortStream("read file", err)
			}
			return err
		}
		if !hw.wrote {
			hw.Write(nil) // an empty file is still a 200
		}
		return nil
	})
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	var mode uint64
	if m := r.URL.Query().Get("mode"); m != "" {
		var err error
		if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o777 {
			writeError(w, errdefs.Invalid("mode %q: want octal permission bits such as 0644 or 0755", m))
			return
		}
	}
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		if err := ag.WriteFileMode(r.Context(), path, user, os.FileMode(mode), r.Body); err != nil {
			return err
		}
		e, err := ag.Stat(r.Context(), path, user)
		if err != nil {
			return err
		}
		s.recordFile(r, api.LedgerFileWrite, path, map[string]string{"size_bytes": strconv.FormatInt(e.GetSize(), 10)})
		writeJSON(w, http.StatusOK, toFileInfo(e))
		return nil
	})
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) {
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		// The agent removes a missing path without complaint, as envd does;
		// this API says it is not there.
		if _, err := ag.Stat(r.Context(), path, user); err != nil {
			return err
		}
		if err := ag.Remove(r.Context(), path, user); err != nil {
			return err
		}
		s.recordFile(r, api.LedgerFileRemove, path, nil)
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	s.withAgent(w, r, false, func(ag *client.Client, path, user string) error {
		if path == "" {
			path = "."
		}
		entries, err := ag.ListDir(r.Context(), path, user)
		if err != nil {
			return err
		}
		out := api.FileList{Entries: make([]api.FileInfo, 0, len(entries))}
		for _, e := range entries {
			out.Entries = append(out.Entries, toFileInfo(e))
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

func (s *Server) stat(w http.ResponseWriter, r *http.Request) {
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		e, err := ag.Stat(r.Context(), path, user)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toFileInfo(e))
		return nil
	})
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request) {
	var req api.PathRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	q.Set("path", req.Path)
	r.URL.RawQuery = q.Encode()
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		e, err := ag.MakeDir(r.Context(), path, user)
		if err != nil {
			return err
		}
		s.recordFile(r, api.LedgerMkdir, path, nil)
		writeJSON(w, http.StatusOK, toFileInfo(e))
		return nil
	})
}

func (s *Server) move(w http.ResponseWriter, r *http.Request) {
	var req api.MoveRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Source == "" || req.Destination == "" {
		writeError(w, errdefs.Invalid("source and destination are required"))
		return
	}
	q := r.URL.Query()
	q.Set("path", req.Destination)
	r.URL.RawQuery = q.Encode()
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		if len(req.Source) > maxPath || strings.ContainsRune(req.Source, 0) {
			return errdefs.Invalid("source is not a valid path")
		}
		e, err := ag.Move(r.Context(), req.Source, path, user)
		if err != nil {
			return err
		}
		s.recordFile(r, api.LedgerFileMove, path, map[string]string{"source": req.Source})
		writeJSON(w, http.StatusOK, toFileInfo(e))
		return nil
	})
}

func (s *Server) tarOut(w http.ResponseWriter, r *http.Request) {
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		hw := &headerOnce{w: w, contentType: "application/x-tar"}
		if err := ag.TarOut(r.Context(), path, user, hw); err != nil {
			if hw.wrote {
				s.abortStream("tar out", err)
			}
			return err
		}
		if !hw.wrote {
			hw.Write(nil)
		}
		return nil
	})
}

func (s *Server) tarIn(w http.ResponseWriter, r *http.Request) {
	s.withAgent(w, r, true, func(ag *client.Client, path, user string) error {
		if err := ag.TarIn(r.Context(), path, user, r.Body); err != nil {
			return err
		}
		s.recordFile(r, api.LedgerTarUpload, path, nil)
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
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
