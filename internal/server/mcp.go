package server

import (
	"net/http"
	"strconv"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/mcp"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// routesMCP mounts the MCP server (streamable HTTP) at /mcp, behind the same
// authentication as the rest of the API. It reaches the daemon through the
// API socket with the Go SDK rather than calling the controller, so MCP
// tools can never do more than the REST API allows.
//
// /mcp?keep=true keeps each session's default sandbox when the session
// ends; by default it is destroyed.
func (s *Server) routesMCP(m *http.ServeMux) {
	if s.opts.MCPSocket == "" {
		return
	}
	c := &paddock.Client{Socket: s.opts.MCPSocket}
	log := s.log.With("part", "mcp")
	destroy := mcp.New(mcp.Options{Client: c, Logger: log, Version: s.opts.Version}).HTTPHandler()
	keep := mcp.New(mcp.Options{Client: c, KeepDefault: true, Logger: log, Version: s.opts.Version}).HTTPHandler()
	m.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		h := destroy
		if v := r.URL.Query().Get("keep"); v != "" {
			k, err := strconv.ParseBool(v)
			if err != nil {
				writeError(w, errdefs.Invalid("keep=%q: want true or false", v))
				return
			}
			if k {
				h = keep
			}
		}
		h.ServeHTTP(w, r)
	})
}
