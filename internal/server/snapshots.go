package server

import (
	"errors"
	"net/http"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/httpbody"
)

// maxImportBody bounds an imported snapshot file.
const maxImportBody = 64 << 30

func (s *Server) routesSnapshots(m *http.ServeMux) {
	m.HandleFunc("POST /v1/sandboxes/{id}/snapshots", s.createSnapshot)
	m.HandleFunc("POST /v1/sandboxes/{id}/fork", s.serves(s.opts.Forks != nil, "forks", s.fork))
	m.HandleFunc("GET /v1/snapshots", s.listSnapshots)
	m.HandleFunc("POST /v1/snapshots/import", s.importSnapshot)
	m.HandleFunc("GET /v1/snapshots/{snapshot}", s.getSnapshot)
	m.HandleFunc("PATCH /v1/snapshots/{snapshot}", s.updateSnapshot)
	m.HandleFunc("DELETE /v1/snapshots/{snapshot}", s.deleteSnapshot)
	m.HandleFunc("GET /v1/snapshots/{snapshot}/export", s.exportSnapshot)
}

// decodeOptional decodes a JSON body that may be left out entirely.
func (s *Server) decodeOptional(r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return s.decode(r, maxJSONBody, v)
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSnapshotRequest
	if err := s.decodeOptional(r, &req); err != nil {
		writeError(w, err)
		return
	}
	snap, err := s.opts.Controller.CreateSnapshot(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, snap)
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	var req api.ForkRequest
	if err := s.decodeOptional(r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.opts.Forks.Fork(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Controller.ListSnapshots(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.SnapshotList{Snapshots: list})
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := s.opts.Controller.GetSnapshot(r.Context(), r.PathValue("snapshot"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) updateSnapshot(w http.ResponseWriter, r *http.Request) {
	var req api.UpdateSnapshotRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	snap, err := s.opts.Controller.SetSnapshotTTL(r.Context(), r.PathValue("snapshot"), req.TTL)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Controller.DeleteSnapshot(r.Context(), r.PathValue("snapshot")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) exportSnapshot(w http.ResponseWriter, r *http.Request) {
	hw := &headerOnce{w: w, contentType: "application/x-tar"}
	err := s.opts.Controller.ExportSnapshot(r.Context(), r.PathValue("snapshot"), hw)
	switch {
	case err != nil && !hw.wrote:
		writeError(w, err)
	case err != nil:
		s.abortStream("snapshot export", err)
	case !hw.wrote:
		hw.Write(nil)
	}
}

func (s *Server) importSnapshot(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.ContentLength > maxImportBody {
		writeError(w, httpbody.TooLarge(r.ContentLength, maxImportBody))
		return
	}
	filesOnly, err := queryBool(q, "files_only")
	if err != nil {
		writeError(w, err)
		return
	}
	// Streamed to disk, never held in memory: no body budget.
	body := http.MaxBytesReader(w, r.Body, maxImportBody)
	var snap *api.Snapshot
	snap, err = s.opts.Controller.ImportSnapshot(r.Context(), body, controller.ImportOptions{
		Name: q.Get("name"), TTL: q.Get("ttl"), MaxBytes: maxImportBody, FilesOnly: filesOnly,
	})
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = httpbody.TooLarge(-1, maxImportBody)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, snap)
}
