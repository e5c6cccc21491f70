package server

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/mcp"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// callerHeader carries, on the unix socket only, the id of the API key an
// in-daemon client (the MCP server) acts for. Whoever can open the socket
// may already create and use any key, so honouring it there grants
// nothing new; TCP listeners never read it.
const callerHeader = "X-Paddock-Caller"

// mcpHandlers are the three MCP endpoints (how a session's default sandbox
// ends) of one caller.
type mcpHandlers struct {
	destroy, keep, snapshot http.Handler
}

// routesMCP mounts the MCP server (streamable HTTP) at /mcp, behind the same
// authentication as the rest of the API. It reaches the daemon through the
// API socket with the Go SDK rather than calling the controller, so MCP
// tools can never do more than the REST API allows. Each API key gets its
// own MCP servers whose requests say which key they act for: creates count
// against that key's quota, and one key's MCP sessions are unknown to
// another's.
//
// /mcp?keep=true keeps each session's default sandbox when the session
// ends, /mcp?snapshot=true snapshots its files and then destroys it; by
// default it is destroyed.
// maxMCPBody bounds one MCP message, as the MCP SDK's default does.
const maxMCPBody = 4 << 20

func (s *Server) routesMCP(m *http.ServeMux) {
	if s.opts.MCPSocket == "" {
		return
	}
	log := s.log.With("part", "mcp")
	var (
		mu       sync.Mutex
		byCaller = map[string]*mcpHandlers{}
	)
	handlers := func(caller string) *mcpHandlers {
		mu.Lock()
		defer mu.Unlock()
		if h, ok := byCaller[caller]; ok {
			return h
		}
		c := &paddock.Client{Socket: s.opts.MCPSocket, HTTPClient: callerClient(s.opts.MCPSocket, caller)}
		l := log.With("caller", caller)
		h := &mcpHandlers{
			destroy:  mcp.New(mcp.Options{Client: c, Logger: l, Version: s.opts.Version}).HTTPHandler(),
			keep:     mcp.New(mcp.Options{Client: c, KeepDefault: true, Logger: l, Version: s.opts.Version}).HTTPHandler(),
			snapshot: mcp.New(mcp.Options{Client: c, SnapshotDefault: true, Logger: l, Version: s.opts.Version}).HTTPHandler(),
		}
		byCaller[caller] = h
		return h
	}
	m.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		hs := handlers(controller.Caller(r.Context()))
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

// callerClient talks to the API socket, marking every request as made for
// the API key caller (nothing for the local caller).
func callerClient(socket, caller string) *http.Client {
	var d net.Dialer
	base := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 8,
	}
	return &http.Client{Transport: callerTransport{caller: caller, base: base}}
}

type callerTransport struct {
	caller string
	base   http.RoundTripper
}

func (t callerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.caller == "" || t.caller == api.CallerLocal {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set(callerHeader, t.caller)
	return t.base.RoundTrip(r)
}

// actFor applies callerHeader on the unix socket: the request then counts as
// the named key's, which must exist.
func (s *Server) actFor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(callerHeader)
		if id == "" {
			// The unix socket's own caller: the daemon's owner.
			next.ServeHTTP(w, r.WithContext(controller.WithCaller(r.Context(), api.CallerLocal, api.KeyScopeAll)))
			return
		}
		if len(id) > 128 {
			writeError(w, errdefs.ErrUnauthenticatedf("%s names no API key", callerHeader))
			return
		}
		k, err := s.opts.Store.GetKey(r.Context(), id)
		if err != nil {
			writeError(w, errdefs.ErrUnauthenticatedf("%s names no API key", callerHeader))
			return
		}
		// The key's scope comes with it: an MCP client sees what its key sees.
		next.ServeHTTP(w, r.WithContext(controller.WithCaller(r.Context(), k.ID, k.Scope)))
	})
}
