package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// CodeInterpreterPort is the port E2B's code-interpreter SDK sends runCode
// and its context calls to. The daemon serves that protocol itself, backed
// by Paddock's code contexts, for every E2B sandbox: a process in the
// sandbox listening on this port is not reachable through the data plane.
const CodeInterpreterPort = 49999

// Bounds of the code-interpreter surface. The code itself is bounded by
// the controller (1 MiB); the body may be larger because JSON escapes
// control characters six bytes to one.
const (
	maxExecuteBody = 8 << 20
	maxCodeBytes   = 1 << 20
	// contextOpTimeout bounds a restart's delete and create, which run on
	// after the client leaves so a context is never left half restarted.
	contextOpTimeout = time.Minute
)

// defaultContextPrefix names the context a run without context_id uses,
// one per language, created on first use and kept between runs.
const defaultContextPrefix = "e2b-default-"

// ciContextIDRE matches the context ids Paddock's agent accepts.
var ciContextIDRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$`)

// executeBody is the body of POST /execute as the SDK sends it.
type executeBody struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// execSpec is a parsed, checked /execute request.
type execSpec struct {
	code      string
	contextID string
	// language is set (python or javascript) when the run goes to the
	// language's default context, which is created if missing.
	language string
	env      map[string]string
}

// contextBody is the body of POST /contexts.
type contextBody struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// ciContext is a context as the SDK reads it.
type ciContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// ciLanguage maps a language name to the one Paddock's contexts run.
func ciLanguage(s string) (string, error) {
	lang, err := wire.CodeLanguage(s)
	if err != nil {
		return "", errdefs.Invalid("language %q is not supported: Paddock's code contexts run python and javascript (javascript needs node in the image)", truncate(s))
	}
	return lang, nil
}

// parseExecute checks an /execute body. It never looks at the sandbox, so
// it can be fuzzed on its own.
func parseExecute(b []byte) (execSpec, error) {
	var body executeBody
	if err := json.Unmarshal(b, &body); err != nil {
		return execSpec{}, errdefs.Invalid("request body is not a valid execute request: %v", err)
	}
	switch {
	case strings.TrimSpace(body.Code) == "":
		return execSpec{}, errdefs.Invalid("code is empty")
	case len(body.Code) > maxCodeBytes:
		return execSpec{}, errdefs.Invalid("code is %d bytes, at most %d", len(body.Code), maxCodeBytes)
	case body.ContextID != "" && body.Language != "":
		return execSpec{}, errdefs.Invalid("give context_id or language, not both")
	}
	spec := execSpec{code: body.Code, env: body.EnvVars}
	if body.ContextID != "" {
		if !ciContextIDRE.MatchString(body.ContextID) {
			return execSpec{}, errdefs.NotFound("code context %q", truncate(body.ContextID))
		}
		spec.contextID = body.ContextID
		return spec, nil
	}
	lang, err := ciLanguage(body.Language)
	if err != nil {
		return execSpec{}, err
	}
	spec.language, spec.contextID = lang, defaultContextPrefix+lang
	return spec, nil
}

// parseContextBody checks a POST /contexts body; empty means defaults.
func parseContextBody(b []byte) (contextBody, error) {
	var body contextBody
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			return contextBody{}, errdefs.Invalid("request body is not a valid context request: %v", err)
		}
	}
	lang, err := ciLanguage(body.Language)
	if err != nil {
		return contextBody{}, err
	}
	body.Language = lang
	if strings.ContainsRune(body.Cwd, 0) || len(body.Cwd) > 4096 {
		return contextBody{}, errdefs.Invalid("cwd is not a valid path")
	}
	return body, nil
}

// readBody reads a whole request body of at most limit bytes under the
// daemon's body budget, which it holds only while reading: the bytes are
// parsed at once.
func (h *Handler) readBody(r *http.Request, limit int64) ([]byte, error) {
	b, release, err := h.bodies.ReadAll(r, limit)
	if err != nil {
		return nil, err
	}
	release()
	return b, nil
}

// serveCodeInterpreter serves the code-interpreter protocol on port
// 49999 of an E2B sandbox. Tokens first: every call needs the traffic
// token when the sandbox has one (as any other port does), and /execute,
// which runs code, needs the envd access token too, as envd's process
// calls do. The SDK sends the access token only with runCode, so the
// context calls cannot be held to it.
func (h *Handler) serveCodeInterpreter(w http.ResponseWriter, r *http.Request, sb *api.Sandbox) {
	if !tokenOK(sb.Labels[labelTrafficToken], r.Header.Get(headerTrafficToken)) {
		writeCIError(w, r, fmt.Errorf("sandbox %s does not allow public traffic: send its trafficAccessToken as %s: %w", sb.ID, headerTrafficToken, errdefs.ErrPermissionDenied))
		return
	}
	route, id, err := ciRoute(r)
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	if route == "execute" && !tokenOK(sb.Labels[labelEnvdToken], r.Header.Get(headerAccessToken)) {
		writeCIError(w, r, errdefs.ErrUnauthenticatedf("sandbox %s is secure: send its envdAccessToken as %s", sb.ID, headerAccessToken))
		return
	}
	if !routable(sb) {
		writeSandboxNotFound(w, sb.ID) // proxy.go: what E2B's proxy answers
		return
	}
	if h.opts.Contexts == nil {
		writeCIError(w, r, fmt.Errorf("this daemon does not serve code contexts: %w", errdefs.ErrUnavailable))
		return
	}
	switch route {
	case "execute":
		h.ciExecute(w, r, sb)
	case "list":
		h.ciList(w, r, sb)
	case "create":
		h.ciCreate(w, r, sb)
	case "delete":
		if err := h.opts.Contexts.Delete(r.Context(), sb.ID, id); err != nil {
			writeCIError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "restart":
		h.ciRestart(w, r, sb, id)
	}
}

// ciRoute names the call a request makes: execute, list, create, delete
// or restart, with the context id for the last two.
func ciRoute(r *http.Request) (route, id string, err error) {
	p := r.URL.Path
	allow := func(method, name string) (string, string, error) {
		if r.Method != method {
			return "", "", fmt.Errorf("%s %s: use %s: %w", r.Method, truncate(p), method, errMethod)
		}
		return name, id, nil
	}
	switch {
	case p == "/execute":
		return allow(http.MethodPost, "execute")
	case p == "/contexts":
		switch r.Method {
		case http.MethodGet:
			return "list", "", nil
		case http.MethodPost:
			return "create", "", nil
		}
		return "", "", fmt.Errorf("%s /contexts: use GET or POST: %w", r.Method, errMethod)
	case strings.HasPrefix(p, "/contexts/"):
		rest := strings.TrimPrefix(p, "/contexts/")
		restart := false
		if s, ok := strings.CutSuffix(rest, "/restart"); ok {
			rest, restart = s, true
		}
		if !ciContextIDRE.MatchString(rest) {
			return "", "", errdefs.NotFound("code context %q", truncate(rest))
		}
		id = rest
		if restart {
			return allow(http.MethodPost, "restart")
		}
		return allow(http.MethodDelete, "delete")
	}
	return "", "", errdefs.NotFound("the code interpreter has no route %s (it serves /execute and /contexts)", truncate(p))
}

// errMethod marks a known path called with the wrong method (405).
var errMethod = errors.New("method not allowed")

func (h *Handler) ciExecute(w http.ResponseWriter, r *http.Request, sb *api.Sandbox) {
	b, err := h.readBody(r, maxExecuteBody)
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	spec, err := parseExecute(b)
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	cx := h.opts.Contexts
	s := newExecStream(w)
	req := api.RunCodeRequest{Code: spec.code, Env: spec.env}
	// The client's abort (the SDK's timeoutMs) cancels r.Context(), which
	// interrupts the run as a timeout would; the context stays usable.
	err = cx.Run(r.Context(), sb.ID, spec.contextID, req, s.emit)
	if err != nil && spec.language != "" && errors.Is(err, errdefs.ErrNotFound) {
		// The language's default context does not exist yet. One made
		// meanwhile by a parallel run is just as good.
		_, cerr := cx.Create(r.Context(), sb.ID, api.CreateContextRequest{ID: spec.contextID, Language: spec.language})
		if cerr != nil && !errors.Is(cerr, errdefs.ErrConflict) {
			writeCIError(w, r, cerr)
			return
		}
		err = cx.Run(r.Context(), sb.ID, spec.contextID, req, s.emit)
	}
	if err != nil {
		// Nothing was streamed: the run did not start.
		writeCIError(w, r, err)
		return
	}
	if s.err != nil {
		h.log.Debug("e2b code interpreter: the client left during a run", "sandbox", sb.ID, "context", spec.contextID, "err", s.err)
	}
}

func (h *Handler) ciList(w http.ResponseWriter, r *http.Request, sb *api.Sandbox) {
	list, err := h.opts.Contexts.List(r.Context(), sb.ID)
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	out := make([]ciContext, 0, len(list))
	for _, c := range list {
		out = append(out, ciContext{ID: c.ID, Language: c.Language, Cwd: c.Cwd})
	}
	writeJSON(w, http.StatusOK, out)
}

func newContextID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (h *Handler) ciCreate(w http.ResponseWriter, r *http.Request, sb *api.Sandbox) {
	b, err := h.readBody(r, maxBody)
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	body, err := parseContextBody(b)
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	c, err := h.opts.Contexts.Create(r.Context(), sb.ID, api.CreateContextRequest{ID: newContextID(), Language: body.Language, Cwd: body.Cwd})
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ciContext{ID: c.ID, Language: c.Language, Cwd: c.Cwd})
}

// ciRestart gives a context a fresh interpreter under the same id, with
// the language, directory and user it had. Variables it was created with
// through Paddock's API (env) are not kept: the agent does not report
// them.
func (h *Handler) ciRestart(w http.ResponseWriter, r *http.Request, sb *api.Sandbox, id string) {
	cx := h.opts.Contexts
	list, err := cx.List(r.Context(), sb.ID)
	if err != nil {
		writeCIError(w, r, err)
		return
	}
	var old *api.CodeContext
	for i := range list {
		if list[i].ID == id {
			old = &list[i]
		}
	}
	if old == nil {
		writeCIError(w, r, errdefs.NotFound("code context %q", id))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), contextOpTimeout)
	defer cancel()
	if err := cx.Delete(ctx, sb.ID, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		writeCIError(w, r, err)
		return
	}
	if _, err := cx.Create(ctx, sb.ID, api.CreateContextRequest{ID: id, Language: old.Language, Cwd: old.Cwd, User: old.User}); err != nil {
		writeCIError(w, r, fmt.Errorf("restart code context %q: the old interpreter is gone and a new one did not start: %w", id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
