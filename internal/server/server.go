// Package server is Paddock's HTTP API (/v1): routing, authentication,
// request bounds, NDJSON streaming, and the one place where errors become
// HTTP statuses.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/backups"
	"github.com/paddock-dev/paddock/internal/controller/codecontexts"
	"github.com/paddock-dev/paddock/internal/controller/forks"
	"github.com/paddock-dev/paddock/internal/controller/images"
	"github.com/paddock-dev/paddock/internal/controller/ledgers"
	"github.com/paddock-dev/paddock/internal/controller/previews"
	"github.com/paddock-dev/paddock/internal/controller/secrets"
	"github.com/paddock-dev/paddock/internal/controller/templates"
	"github.com/paddock-dev/paddock/internal/controller/warmpools"
	"github.com/paddock-dev/paddock/internal/controller/watches"
	"github.com/paddock-dev/paddock/internal/controller/workspaces"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/store"
)

// Images is what the API needs of the image store.
type Images interface {
	List(ctx context.Context) ([]*image.Image, error)
	Build(ctx context.Context, name string, progress image.Progress) (*image.Image, error)
	Ensure(ctx context.Context, name string, progress image.Progress) (*image.Image, error)
}

// Options wires a Server.
type Options struct {
	Controller *controller.Controller
	// Workspaces serves /v1/workspaces; nil: none (each route says so).
	Workspaces *workspaces.Service
	// Backups serves /v1/backups; nil: none (each route says so).
	Backups *backups.Service
	// Previews serves exposed ports and the preview listener; nil: none.
	Previews *previews.Service
	// Secrets serves /v1/secrets; nil: none (each route says so).
	Secrets *secrets.Service
	// Contexts serves code contexts; nil: none (each route says so).
	Contexts *codecontexts.Service
	// Watches serves directory watches; nil: none (the route says so).
	Watches *watches.Service
	// Templates builds and serves templates; nil: none (each route says
	// so).
	Templates *templates.Service
	// Forks makes a sandbox's copies; nil: none (the route says so).
	Forks *forks.Service
	// Pools keeps warm pools; nil: none (each route says so, and the
	// metrics show none).
	Pools *warmpools.Service
	// Ledgers serves reading ledgers and callers' own entries; nil: none
	// (each route says so).
	Ledgers *ledgers.Service
	// ImageAdmin removes, collects, accounts imports of and exports
	// images; nil: none of those routes is served (each says so).
	ImageAdmin *images.Service
	Store      store.Store // API keys
	Images     Images
	Logger     *slog.Logger
	Version    string
	// MCP mounts the MCP server at /mcp; it reaches the API in-process,
	// through the same handlers as any other client (mcp.go).
	MCP bool
	// Bodies bounds the request bodies all requests together hold in
	// memory; nil means a budget of httpbody.DefaultBudget. Share one
	// with the E2B API.
	Bodies *httpbody.Budget
}

// Server serves the API. Handler() gives the handler for a listener.
type Server struct {
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	bodies  *httpbody.Budget
	streams eventStreams // GET /v1/events held open (events.go)
}

// maxJSONBody bounds request bodies that are JSON documents; exec bodies
// may carry stdin and get more.
const (
	maxJSONBody = 1 << 20
	maxExecBody = 2*api.MaxExecStdin + maxJSONBody // base64 inflates stdin by 4/3
)

// New builds a Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Bodies == nil {
		opts.Bodies = httpbody.NewBudget(0)
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), bodies: opts.Bodies}
	s.routes()
	return s
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /v1/health", s.health)
	m.HandleFunc("GET /v1/openapi.json", s.openapi)
	m.HandleFunc("GET /v1/metrics", s.metrics)
	m.HandleFunc("POST /v1/sandboxes", s.createSandbox)
	m.HandleFunc("GET /v1/sandboxes", s.listSandboxes)
	m.HandleFunc("GET /v1/sandboxes/{id}", s.getSandbox)
	m.HandleFunc("DELETE /v1/sandboxes/{id}", s.deleteSandbox)
	m.HandleFunc("POST /v1/sandboxes/{id}/stop", s.stopSandbox)
	m.HandleFunc("POST /v1/sandboxes/{id}/start", s.startSandbox)
	m.HandleFunc("POST /v1/sandboxes/{id}/pause", s.pauseSandbox)
	m.HandleFunc("POST /v1/sandboxes/{id}/resume", s.resumeSandbox)
	m.HandleFunc("GET /v1/sandboxes/{id}/history", s.history)
	m.HandleFunc("POST /v1/sandboxes/{id}/exec", s.exec)
	m.HandleFunc("GET /v1/sandboxes/{id}/files", s.readFile)
	m.HandleFunc("PUT /v1/sandboxes/{id}/files", s.writeFile)
	m.HandleFunc("DELETE /v1/sandboxes/{id}/files", s.removeFile)
	m.HandleFunc("GET /v1/sandboxes/{id}/files/list", s.listDir)
	m.HandleFunc("GET /v1/sandboxes/{id}/files/stat", s.stat)
	m.HandleFunc("POST /v1/sandboxes/{id}/files/mkdir", s.mkdir)
	m.HandleFunc("POST /v1/sandboxes/{id}/files/move", s.move)
	m.HandleFunc("GET /v1/sandboxes/{id}/tar", s.tarOut)
	m.HandleFunc("PUT /v1/sandboxes/{id}/tar", s.tarIn)
	m.HandleFunc("GET /v1/sandboxes/{id}/layer", s.exportLayer)
	s.routesSnapshots(m)
	m.HandleFunc("GET /v1/images", s.listImages)
	m.HandleFunc("POST /v1/images/{name}/build", s.buildImage)
	s.routesImageImport(m)
	m.HandleFunc("POST /v1/keys", s.createKey)
	m.HandleFunc("GET /v1/keys", s.listKeys)
	m.HandleFunc("DELETE /v1/keys/{id}", s.deleteKey)
	s.routesMCP(m)
	s.routesInteractive(m)
	s.routesLedger(m)
	s.routesBackups(m)
	s.routesNetwork(m)
	s.routesSecrets(m)
	s.routesSessions(m)
	s.routesProcs(m)
	s.routesContexts(m)
	s.routesAdmission(m)
	s.routesTemplates(m)
	s.routesEvents(m)
	s.routesWorkspaces(m)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errdefs.NotFound("no route %s %s", r.Method, r.URL.Path))
	})
}

// Handler returns the API handler. With requireKey (TCP listeners), every
// request but /v1/health must carry a valid API key.
func (s *Server) Handler(requireKey bool) http.Handler {
	var h http.Handler = s.mux
	h = s.idempotent(h) // inside authentication: keys are per credential
	if requireKey {
		h = s.requireKey(h)
	} else {
		h = localCaller(h)
	}
	return s.logRequests(h)
}

// localCaller makes every request the local caller's: the unix socket's,
// whose file mode decides who may use it (the daemon's owner).
func localCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(controller.WithCaller(r.Context(), api.CallerLocal, api.KeyScopeAll)))
	})
}

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, log: s.log, r: r}
		body := r.Body // handlers may replace it; drain the connection's own
		next.ServeHTTP(sw, r)
		if sw.status >= 400 {
			// A refused body (too large, no budget) is often left unread:
			// without this the client may get a reset, not the answer.
			r.Body = body
			httpbody.Drain(w, r)
		}
		// The query is left out: it may carry file paths, never secrets,
		// but keep logs lean and predictable.
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "took", time.Since(start))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	log    *slog.Logger
	r      *http.Request
}

// LogInternal implements errhttp.InternalLogger: an internal error's
// details go to the log, never to the client.
func (w *statusWriter) LogInternal(ref string, err error) {
	w.log.Error("internal error", "reference", ref, "method", w.r.Method, "path", w.r.URL.Path, "err", err)
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeError answers with err's class: its status from errhttp.API (the
// one table of the API's statuses) and a message safe to show the client.
func writeError(w http.ResponseWriter, err error) {
	code := errdefs.Code(err)
	writeJSON(w, errhttp.API.Status(code), api.Error{Code: code, Message: errhttp.PublicMessage(w, err)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decode reads a bounded JSON body under the daemon's body budget,
// refusing unknown fields and trailing data. A body over limit is 413
// payload_too_large, refused by its Content-Length before it is read.
func (s *Server) decode(r *http.Request, limit int64, v any) error {
	return s.bodies.DecodeJSON(r, limit, v, httpbody.DecodeOptions{})
}

// ndjson writes one JSON document per line and flushes each, so a client
// sees events as they happen.
type ndjson struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc *json.Encoder
}

func newNDJSON(w http.ResponseWriter) *ndjson {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &ndjson{w: w, rc: http.NewResponseController(w), enc: json.NewEncoder(w)}
}

func (n *ndjson) send(v any) error {
	if err := n.enc.Encode(n.public(v)); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return n.rc.Flush()
}

// public hides an internal error's text in a streamed event, as
// writeError does for a whole response: the client gets a reference, the
// log the details (errhttp.PublicMessage). The events that carry an
// api.Error are listed here.
func (n *ndjson) public(v any) any {
	switch ev := v.(type) {
	case api.ExecEvent:
		ev.Error = publicAPIError(n.w, ev.Error)
		return ev
	case api.WatchEvent:
		ev.Error = publicAPIError(n.w, ev.Error)
		return ev
	case api.BuildEvent:
		ev.Error = publicAPIError(n.w, ev.Error)
		return ev
	case api.TemplateBuildEvent:
		ev.Error = publicAPIError(n.w, ev.Error)
		return ev
	}
	return v
}

// publicAPIError is e as a client may see it.
func publicAPIError(w http.ResponseWriter, e *api.Error) *api.Error {
	if e == nil || e.Code != api.CodeInternal {
		return e
	}
	return &api.Error{Code: e.Code, Message: errhttp.PublicMessage(w, errors.New(e.Message))}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: s.opts.Version, Runtimes: s.opts.Controller.Runtimes(), DefaultImage: s.opts.Controller.DefaultImage()})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(api.OpenAPI())
}
