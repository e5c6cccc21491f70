package server

import (
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// routesProcs serves a sandbox's whole process table: every process, not
// only Paddock's, and the way to end them all but the agent
// (docs/sessions.md).
func (s *Server) routesProcs(m *http.ServeMux) {
	m.HandleFunc("GET /v1/sandboxes/{id}/procs", s.listProcs)
	m.HandleFunc("POST /v1/sandboxes/{id}/procs/kill-all", s.killAll)
}

func (s *Server) listProcs(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Controller.Procs(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// killAll takes an optional body: none means SIGKILL at once.
func (s *Server) killAll(w http.ResponseWriter, r *http.Request) {
	var req api.KillAllRequest
	if err := s.decodeOptional(r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.opts.Controller.KillAll(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
