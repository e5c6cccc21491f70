package server

import (
	"fmt"
	"net/http"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// routesBackups adds the backup routes (internal/controller/backups).
func (s *Server) routesBackups(m *http.ServeMux) {
	has := s.opts.Backups != nil
	m.HandleFunc("POST /v1/sandboxes/{id}/backups", s.serves(has, "backups", s.createBackup))
	m.HandleFunc("GET /v1/backups", s.serves(has, "backups", s.listBackups))
	m.HandleFunc("GET /v1/backups/{backup}", s.serves(has, "backups", s.getBackup))
	m.HandleFunc("DELETE /v1/backups/{backup}", s.serves(has, "backups", s.deleteBackup))
	m.HandleFunc("POST /v1/backups/{backup}/restore", s.serves(has, "backups", s.restoreBackup))
}

// serves is h on a server built with the subsystem it needs (has); on one
// built without it, the route says so.
func (s *Server) serves(has bool, what string, h http.HandlerFunc) http.HandlerFunc {
	if has {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("this server does not serve %s: %w", what, errdefs.ErrUnavailable))
	}
}

func (s *Server) createBackup(w http.ResponseWriter, r *http.Request) {
	var req api.CreateBackupRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	b, err := s.opts.Backups.Create(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, b)
}

func (s *Server) listBackups(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Backups.List(r.Context(), r.URL.Query().Get("sandbox"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.BackupList{Backups: list})
}

func (s *Server) getBackup(w http.ResponseWriter, r *http.Request) {
	b, err := s.opts.Backups.Get(r.Context(), r.PathValue("backup"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) deleteBackup(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Backups.Delete(r.Context(), r.PathValue("backup")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) restoreBackup(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreBackupRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	b, err := s.opts.Backups.Restore(r.Context(), r.PathValue("backup"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}
