package server

import (
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// routesContexts serves code contexts (docs/code-contexts.md).
func (s *Server) routesContexts(m *http.ServeMux) {
	has := s.opts.Contexts != nil
	m.HandleFunc("POST /v1/sandboxes/{id}/contexts", s.serves(has, "code contexts", s.createContext))
	m.HandleFunc("GET /v1/sandboxes/{id}/contexts", s.serves(has, "code contexts", s.listContexts))
	m.HandleFunc("DELETE /v1/sandboxes/{id}/contexts/{ctx}", s.serves(has, "code contexts", s.deleteContext))
	m.HandleFunc("POST /v1/sandboxes/{id}/contexts/{ctx}/run", s.serves(has, "code contexts", s.runCode))
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	var req api.CreateContextRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	c, err := s.opts.Contexts.Create(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Contexts.List(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.CodeContextList{Contexts: list})
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Contexts.Delete(r.Context(), r.PathValue("id"), r.PathValue("ctx")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxCodeBody leaves room for 1 MiB of code, JSON-escaped.
const maxCodeBody = 8 << 20

func (s *Server) runCode(w http.ResponseWriter, r *http.Request) {
	var req api.RunCodeRequest
	if err := s.decode(r, maxCodeBody, &req); err != nil {
		writeError(w, err)
		return
	}
	var out *ndjson
	err := s.opts.Contexts.Run(r.Context(), r.PathValue("id"), r.PathValue("ctx"), req, func(ev api.RunCodeEvent) error {
		if out == nil {
			out = newNDJSON(w)
		}
		return out.send(ev)
	})
	if err != nil && out == nil {
		writeError(w, err)
	}
}
