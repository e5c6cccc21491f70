package server

import (
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// routesNetwork adds a sandbox's network rules.
func (s *Server) routesNetwork(m *http.ServeMux) {
	m.HandleFunc("GET /v1/sandboxes/{id}/network", s.getNetwork)
	m.HandleFunc("PUT /v1/sandboxes/{id}/network", s.putNetwork)
}

func (s *Server) getNetwork(w http.ResponseWriter, r *http.Request) {
	p, err := s.opts.Controller.NetworkPolicy(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) putNetwork(w http.ResponseWriter, r *http.Request) {
	var req api.UpdateNetworkRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.opts.Controller.SetNetworkRules(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}
