// Package e2b lets code written against E2B's SDKs run on Paddock unchanged.
// It serves, on the daemon's TCP listener next to /v1, the subset of E2B's
// control-plane REST API that the `e2b` SDKs call (mapped onto the
// controller), and E2B's data plane: requests addressed to a sandbox by the
// E2b-Sandbox-Id/E2b-Sandbox-Port headers or a {port}-{id}.{domain} host
// name are relayed to the sandbox's agent (which speaks envd's protocol) or
// to a port inside the sandbox.
package e2b

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/codecontexts"
	"github.com/paddock-dev/paddock/internal/controller/forks"
	"github.com/paddock-dev/paddock/internal/controller/secrets"
	"github.com/paddock-dev/paddock/internal/controller/templates"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/store"
)

// Keys looks API keys up by the hash of their secret.
type Keys interface {
	KeyByHash(ctx context.Context, hash []byte) (*store.Key, error)
}

// Options wire a Handler.
type Options struct {
	Controller *controller.Controller
	// Secrets serves E2B's secrets API; nil: none (it says so).
	Secrets *secrets.Service
	// Contexts serves the code interpreter's port; nil: none (it says so).
	Contexts *codecontexts.Service
	// Templates serves E2B's template build API; nil: none (it says so).
	Templates *templates.Service
	// Forks makes a sandbox's copies; nil: none (the fork route says so).
	Forks *forks.Service
	// PullImage pulls an image reference for ctx's caller (as
	// `paddock images pull` does), its progress by line, and returns its
	// digest: a template build from an image this daemon does not have
	// pulls it first, with the registry credentials the build gave (nil:
	// anonymously). nil: such a build fails.
	PullImage func(ctx context.Context, ref string, auth *image.RegistryAuth, progress func(string)) (digest string, err error)
	// Context is the daemon's lifetime: template builds, which outlive
	// their requests, end with it (nil: never).
	Context context.Context
	// Builds keeps template builds' state across restarts (buildrecords.go);
	// nil: in memory only (a restart forgets them).
	Builds store.E2BBuildStore
	Keys   Keys
	// HashKey is how key secrets are hashed for lookup (the API server's).
	HashKey func(secret string) []byte
	// DefaultNetwork is what a create that says nothing about internet
	// access gets: config.E2BNetworkNone ("" too) or config.E2BNetworkAll.
	DefaultNetwork string
	Logger         *slog.Logger
	// Bodies bounds the request bodies held in memory, shared with the
	// API server; nil means a budget of its own.
	Bodies *httpbody.Budget
}

// Handler serves E2B's two planes: requests addressed to a sandbox (the
// data plane) and E2B's REST API (the control plane). The listener's router
// (internal/daemon) sends it everything that is not Paddock's own API.
type Handler struct {
	opts   Options
	log    *slog.Logger
	mux    *http.ServeMux
	bodies *httpbody.Budget
	// samples is each E2B sandbox's recent metrics (metrics.go).
	samples *sampler
	// secretsMu makes a secret's existence check and store one step for
	// this API's creates and updates (secrets.go).
	secretsMu sync.Mutex
	// builds are E2B template builds (templatebuild.go).
	builds *buildTable
}

// maxBody bounds E2B JSON request bodies.
const maxBody = 1 << 20

// clientID is what E2B's "clientID" field says for every sandbox.
const clientID = "paddock"

// New builds the handler.
func New(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Bodies == nil {
		opts.Bodies = httpbody.NewBudget(0)
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	h := &Handler{opts: opts, log: opts.Logger, mux: http.NewServeMux(), bodies: opts.Bodies, samples: newSampler(), builds: newBuildTable()}
	h.builds.rec, h.builds.log = opts.Builds, opts.Logger
	h.endUnfinishedBuilds()
	h.routes()
	return h
}

// EnvdVersion is the envd version reported for every sandbox: the agent's.
func EnvdVersion() string { return wire.EnvdVersion }

func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("POST /sandboxes", h.create)
	m.HandleFunc("POST /v2/sandboxes", h.create)
	m.HandleFunc("GET /sandboxes", h.listV1)
	m.HandleFunc("GET /v2/sandboxes", h.listV2)
	m.HandleFunc("GET /sandboxes/{id}", h.get)
	m.HandleFunc("DELETE /sandboxes/{id}", h.kill)
	m.HandleFunc("POST /sandboxes/{id}/timeout", h.setTimeout)
	m.HandleFunc("POST /sandboxes/{id}/pause", h.pause)
	m.HandleFunc("POST /sandboxes/{id}/resume", h.resume)
	m.HandleFunc("POST /sandboxes/{id}/connect", h.connect) // e2b before 2.51
	m.HandleFunc("POST /v2/sandboxes/{id}/connect", h.connect)
	m.HandleFunc("GET /sandboxes/{id}/metrics", h.metrics)
	m.HandleFunc("PUT /sandboxes/{id}/network", h.setNetwork)
	m.HandleFunc("POST /sandboxes/{id}/fork", h.fork)
	m.HandleFunc("POST /sandboxes/{id}/snapshots", h.createSnapshot)
	m.HandleFunc("GET /snapshots", h.listSnapshots)
	m.HandleFunc("DELETE /templates/{id}", h.deleteTemplate)
	h.routesTemplateBuilds(m)
	m.HandleFunc("GET /secrets", h.withSecrets(h.listSecrets))
	m.HandleFunc("POST /secrets", h.withSecrets(h.createSecret))
	m.HandleFunc("GET /secrets/{id}", h.withSecrets(h.getSecret))
	m.HandleFunc("POST /secrets/{id}", h.withSecrets(h.updateSecret))
	m.HandleFunc("DELETE /secrets/{id}", h.withSecrets(h.deleteSecret))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errdefs.NotFound("this Paddock daemon does not serve %s %s of E2B's API (see the README's E2B section for what is supported)", r.Method, r.URL.Path))
	})
}

// AddressesSandbox says whether r is addressed to a sandbox, by E2B's
// headers or a {port}-{id}.{domain} host: such a request belongs to the
// data plane whatever its path (a malformed address too, which the data
// plane refuses rather than let it reach an API).
func AddressesSandbox(r *http.Request) bool {
	_, ok, err := dataPlaneTarget(r)
	return ok || err != nil
}

// ServeHTTP serves a sandbox-addressed request on the data plane and any
// other on E2B's API (API key required).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, log: h.log, r: r}
	t, ok, err := dataPlaneTarget(r)
	if err != nil {
		writeError(sw, err)
		return
	}
	if ok {
		h.serveDataPlane(sw, r, t)
		return
	}
	if strings.HasPrefix(r.URL.Path, uploadPath) {
		// Template uploads carry their build's token, not an API key.
		h.serveUpload(sw, r)
		return
	}
	keyID, err := h.authenticate(r)
	if err != nil {
		writeError(sw, err)
		return
	}
	// Admission quotas count by the caller's key, as on /v1.
	h.mux.ServeHTTP(sw, r.WithContext(controller.WithCaller(r.Context(), keyID, h.opts.Controller.KeyScope(r.Context(), keyID))))
	if sw.status >= 400 {
		httpbody.Drain(w, r) // answer a refused body, do not reset it
	}
}

// statusWriter remembers the status of an E2B API answer.
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

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authenticate admits a request with a valid Paddock API key, as E2B's
// X-API-Key (any key works; `paddock keys create --e2b` makes keys in
// E2B's e2b_ format for SDKs that check it) or a bearer token.
func (h *Handler) authenticate(r *http.Request) (string, error) {
	secret := strings.TrimSpace(r.Header.Get("X-API-Key"))
	if secret == "" {
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			secret = strings.TrimSpace(b)
		}
	}
	if secret == "" || len(secret) > 256 {
		return "", errdefs.ErrUnauthenticatedf("an API key is required (X-API-Key); create one with `paddock keys create --e2b NAME`")
	}
	k, err := h.opts.Keys.KeyByHash(r.Context(), h.opts.HashKey(secret))
	if err != nil {
		return "", errdefs.ErrUnauthenticatedf("the API key is not valid")
	}
	return k.ID, nil
}

// statuses is the E2B API's table: Paddock's (errhttp.API) with the
// statuses E2B's SDKs expect. resource_exhausted is 400, not 429: the SDKs
// read 429 as a rate limit and say so, which would mislead; E2B answers
// its own quota refusals with 400 too. failed_precondition is 400, which
// the SDKs raise as InvalidArgumentError, the closest class they have.
var statuses = errhttp.API.With(errhttp.Table{
	api.CodeResourceExhausted:  http.StatusBadRequest,
	api.CodeFailedPrecondition: http.StatusBadRequest,
})

func writeError(w http.ResponseWriter, err error) {
	writeErrorWith(w, statuses, err)
}

// writeErrorWith answers with err's status in table and a message safe to
// show the client, in E2B's (and envd's) error body.
func writeErrorWith(w http.ResponseWriter, table errhttp.Table, err error) {
	st := table.StatusOf(err)
	writeJSON(w, st, apiError{Code: st, Message: errhttp.PublicMessage(w, err)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads an optional, bounded JSON body under the daemon's body
// budget. Unknown fields are allowed: newer SDKs add fields, and the ones
// Paddock cannot honour are checked by name.
func (h *Handler) decode(r *http.Request, v any) error {
	return h.bodies.DecodeJSON(r, maxBody, v, httpbody.DecodeOptions{AllowUnknown: true, AllowEmpty: true})
}
