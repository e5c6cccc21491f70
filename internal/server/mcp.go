package server

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"

	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/mcp"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// maxMCPBody bounds one MCP message, as the MCP SDK's default does.
const maxMCPBody = 4 << 20

// mcpHandlers are the three MCP endpoints (how a session's default sandbox
// ends) of one caller.
type mcpHandlers struct {
	destroy, keep, snapshot http.Handler
	// workspace serves /mcp?workspace=NAME (workspace mode).
	workspace http.Handler
}

// routesMCP mounts the MCP server (streamable HTTP) at /mcp, behind the same
// authentication as the rest of the API. It reaches the API with the Go SDK
// over an in-process transport (inprocess.go) that serves each request with
// the API's own handlers as the MCP request's caller, rather than calling
// the controller, so MCP tools can never do more than the REST API allows.
// Each caller (API key and scope) gets its own MCP servers: creates count
// against that key's quota, and one key's MCP sessions are unknown to
// another's.
//
// /mcp?keep=true keeps each session's default sandbox when the session
// ends, /mcp?snapshot=true snapshots its files and then destroys it; by
// default it is destroyed. /mcp?workspace=NAME serves workspace mode: the
// session works in that workspace (made on first use when missing) and has
// no sandbox tools.
func (s *Server) routesMCP(m *http.ServeMux) {
	if !s.opts.MCP {
		return
	}
	log := s.log.With("part", "mcp")
	var (
		mu       sync.Mutex
		byCaller = map[[2]string]*mcpHandlers{}
	)
	handlers := func(caller, scope string) *mcpHandlers {
		mu.Lock()
		defer mu.Unlock()
		if h, ok := byCaller[[2]string{caller, scope}]; ok {
			return h
		}
		c := &paddock.Client{URL: "http://" + inProcessHost, HTTPClient: &http.Client{Transport: s.inProcess(caller, scope)}}
		l := log.With("caller", caller)
		h := &mcpHandlers{
			destroy:  mcp.New(mcp.Options{Client: c, Logger: l, Version: s.opts.Version}).HTTPHandler(),
			keep:     mcp.New(mcp.Options{Client: c, KeepDefault: true, Logger: l, Version: s.opts.Version}).HTTPHandler(),
			snapshot: mcp.New(mcp.Options{Client: c, SnapshotDefault: true, Logger: l, Version: s.opts.Version}).HTTPHandler(),
			workspace: mcp.WorkspaceHTTPHandler(mcp.Options{Client: c, Logger: l, Version: s.opts.Version},
				func(r *http.Request) string { return r.URL.Query().Get("workspace") }),
		}
		byCaller[[2]string{caller, scope}] = h
		return h
	}
	m.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		hs := handlers(controller.Caller(r.Context()), controller.CallerScope(r.Context()))
		h := hs.destroy
		for _, opt := range []struct {
			name string
			h    http.Handler
		}{{"keep", hs.keep}, {"snapshot", hs.snapshot}} {
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
		if r.URL.Query().Has("workspace") {
			if err := mcp.CheckWorkspaceRef(r.URL.Query().Get("workspace")); err != nil {
				writeError(w, errdefs.Invalid("workspace: %v", err))
				return
			}
			if h != hs.destroy {
				writeError(w, errdefs.Invalid("keep and snapshot are about a session's default sandbox; a workspace session has none (its workspace always stays)"))
				return
			}
			h = hs.workspace
		}
		// The MCP handler reads each message whole (up to its own 4 MiB
		// bound); read it here first, under the daemon's body budget.
		if r.Method == http.MethodPost {
			body, release, err := s.bodies.ReadAll(r, maxMCPBody)
			if err != nil {
				writeError(w, err)
				return
			}
			defer release()
			r.Body = httpbody.Prebuffered{Reader: bytes.NewReader(body)}
		}
		h.ServeHTTP(w, r)
	})
}
