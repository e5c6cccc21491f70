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
// ends, /mcp?snapshot=true snapshots its files and then destroys it; by
// default it is destroyed.
func (s *Server) routesMCP(m *http.ServeMux) {
	if s.opts.MCPSocket == "" {
		return
	}
	c := &paddock.Client{Socket: s.opts.MCPSocket}
	log := s.log.With("part", "mcp")
	destroy := mcp.New(mcp.Options{Client: c, Logger: log, Version: s.opts.Version}).HTTPHandler()
	keep := mcp.New(mcp.Options{Client: c, KeepDefault: true, Logger: log, Version: s.opts.Version}).HTTPHandler()
	snapshot := mcp.New(mcp.Options{Client: c, SnapshotDefault: true, Logger: log, Version: s.opts.Version}).HTTPHandler()
	m.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		h := destroy
		for _, opt := range []struct {
			name string
			h    http.Handler
		}{{"keep", keep}, {"snapshot", snapshot}} {
			v := r.URL.Query().Get(opt.name)
			if v == "" {
				continue
			}
			on, err := strconv.ParseBool(v)
			if err != nil {
				writeError(w, errdefs.Invalid("%s=%q: want true or false", opt.name, v))
				return
			}
			if on {
				h = opt.h
			}
		}
		h.ServeHTTP(w, r)
	})
}
