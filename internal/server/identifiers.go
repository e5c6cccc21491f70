package server

import (
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// routesIdentifiers serves the identifier API in the style of Azure's
// dynamic sessions: a request addressed to a caller-chosen identifier in a
// warm pool is served by the sandbox bound to it, allocated from the pool
// on first use. GET .../identifiers/{identifier} returns (and binds) the
// sandbox; any sandbox route below it (exec, files, sessions, processes,
// ...) works under the prefix, as if addressed by the sandbox's id.
func (s *Server) routesIdentifiers(m *http.ServeMux) {
	m.HandleFunc("GET /v1/pools/{pool}/identifiers/{identifier}", s.identifierSandbox)
	m.HandleFunc("/v1/pools/{pool}/identifiers/{identifier}/{rest...}", s.identifierRoute)
}

// bind returns the sandbox bound to the request's identifier, allocating it
// from the pool (under the pool's admission rules) on first use.
func (s *Server) bind(r *http.Request) (*api.Sandbox, error) {
	return s.opts.Controller.Create(r.Context(), api.CreateSandboxRequest{
		Pool: r.PathValue("pool"), Identifier: r.PathValue("identifier"),
	})
}

func (s *Server) identifierSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.bind(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

// identifierRoute re-addresses the request to /v1/sandboxes/{id}/{rest}
// and serves it with the ordinary handlers, so both forms behave alike.
func (s *Server) identifierRoute(w http.ResponseWriter, r *http.Request) {
	sb, err := s.bind(r)
	if err != nil {
		writeError(w, err)
		return
	}
	r2 := r.Clone(r.Context())
	u := *r.URL
	u.Path = "/v1/sandboxes/" + sb.ID + "/" + r.PathValue("rest")
	u.RawPath = ""
	r2.URL = &u
	r2.RequestURI = u.RequestURI()
	r2.Body = r.Body
	s.mux.ServeHTTP(w, r2)
}
