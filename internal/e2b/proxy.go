package e2b

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// EnvdPort is the port E2B clients address a sandbox's envd on; Paddock
// routes it to the agent.
const EnvdPort = 49983

// Data-plane headers, as E2B's SDKs send them.
const (
	headerSandboxID    = "E2b-Sandbox-Id"
	headerSandboxPort  = "E2b-Sandbox-Port"
	headerAccessToken  = "X-Access-Token"
	headerTrafficToken = "E2b-Traffic-Access-Token"
)

// hostRE matches the first label of a {port}-{id}.{domain} host name.
var hostRE = lazyre.New(`^([0-9]{1,5})-([a-z0-9]{1,32})$`)

// target is a sandbox port a data-plane request is addressed to.
type target struct {
	id   string
	port int
}

// dataPlaneTarget finds the sandbox a request is addressed to, if any: by
// E2B's headers first, else by a {port}-{id}.{domain} host name. A request
// that is addressed but malformed is an error, never passed on to the API.
func dataPlaneTarget(r *http.Request) (target, bool, error) {
	if id := r.Header.Get(headerSandboxID); id != "" || r.Header.Get(headerSandboxPort) != "" {
		port, err := parsePort(r.Header.Get(headerSandboxPort))
		if err != nil {
			return target{}, false, err
		}
		if !validID(id) {
			return target{}, false, errdefs.NotFound("sandbox %q", truncate(id))
		}
		return target{id: id, port: port}, true, nil
	}
	return hostTarget(r.Host)
}

// hostTarget parses a {port}-{id}.{domain}[:port] host. Anything else is
// not a data-plane host.
func hostTarget(host string) (target, bool, error) {
	if len(host) > 255 {
		return target{}, false, nil
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, domain, ok := strings.Cut(strings.ToLower(host), ".")
	if !ok || domain == "" {
		return target{}, false, nil
	}
	m := hostRE.FindStringSubmatch(label)
	if m == nil {
		return target{}, false, nil
	}
	port, err := parsePort(m[1])
	if err != nil {
		return target{}, false, err
	}
	return target{id: m[2], port: port}, true, nil
}

func parsePort(s string) (int, error) {
	digits := len(s) > 0 && len(s) <= 5 && strings.Trim(s, "0123456789") == ""
	p, err := strconv.Atoi(s)
	if !digits || err != nil || p < 1 || p > 65535 {
		return 0, errdefs.Invalid("sandbox port %q: want 1 to 65535", truncate(s))
	}
	return p, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// tokenOK compares a presented token with the expected one in constant
// time. No expected token means none is needed.
func tokenOK(want, got string) bool {
	if want == "" {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// serveDataPlane authenticates the request against the sandbox's tokens
// before anything else happens (an unauthenticated request must not even
// wake a stopped sandbox), then relays it: the envd port to the agent's
// socket, any other port through the agent's port-forward.
//
// A sandbox the data plane cannot route to (unknown, being destroyed, or
// not running and not to be resumed by traffic) gets E2B's proxy answer,
// a 502 with its body: the SDKs read exactly that status as "not
// running" (isRunning() is false, a stream cut by a kill is the sandbox
// having ended).
func (h *Handler) serveDataPlane(w http.ResponseWriter, r *http.Request, t target) {
	// The data plane authenticates by the sandbox's own access token (or
	// a signature made with it), not by an API key: the daemon reaches
	// the sandbox on its own account once that check passed below.
	r = r.WithContext(controller.System(r.Context()))
	// envd's port answers as envd does (errhttp.Envd), the others as
	// E2B's API.
	table := statuses
	if t.port == EnvdPort {
		table = errhttp.Envd
	}
	writeError := func(w http.ResponseWriter, err error) { writeErrorWith(w, table, err) }
	ctrl := h.opts.Controller
	sb, err := ctrl.Get(r.Context(), t.id)
	if err == nil && (sb.ID != t.id || sb.Labels[labelTemplate] == "") {
		err = errdefs.NotFound("sandbox %q", t.id)
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		writeSandboxNotFound(w, t.id)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if t.port == CodeInterpreterPort {
		// Served by the daemon from Paddock's code contexts, with its own
		// token rules (codeinterpreter.go).
		h.serveCodeInterpreter(w, r, sb)
		return
	}
	if t.port == EnvdPort {
		// The access token, or a signed file URL (signedurl.go).
		if err := authorizeEnvd(r, sb.Labels[labelEnvdToken], time.Now()); err != nil {
			writeError(w, err)
			return
		}
	} else if !tokenOK(sb.Labels[labelTrafficToken], r.Header.Get(headerTrafficToken)) {
		writeError(w, fmt.Errorf("sandbox %s does not allow public traffic: send its trafficAccessToken as %s: %w", sb.ID, headerTrafficToken, errdefs.ErrPermissionDenied))
		return
	}
	if t.port == EnvdPort && !envdPath(r.URL) {
		// Only envd's surface is E2B's; Paddock's own agent services
		// (sessions, tar, port-forward) stay behind the /v1 API and its keys.
		writeError(w, errdefs.NotFound("no envd route %s", truncate(r.URL.Path)))
		return
	}
	if !routable(sb) {
		writeSandboxNotFound(w, sb.ID)
		return
	}
	ag, _, done, err := ctrl.Agent(r.Context(), sb.ID)
	if errors.Is(err, errdefs.ErrNotFound) {
		writeSandboxNotFound(w, sb.ID) // destroyed meanwhile
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	// The tokens are the daemon's business; the sandbox never sees them.
	for _, k := range []string{headerAccessToken, headerTrafficToken, headerSandboxID, headerSandboxPort, "X-API-Key"} {
		r.Header.Del(k)
	}
	rp := &httputil.ReverseProxy{
		FlushInterval: -1, // stream every byte as it comes: Connect server streams
		// An answer cut off after its headers (the sandbox's side broke
		// mid-body) can only end the client's connection; say so in the
		// daemon's log, where the client sees just a closed socket.
		ErrorLog: slog.NewLogLogger(h.log.With("sandbox", sb.ID, "port", t.port).Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.log.Debug("e2b data plane", "sandbox", sb.ID, "port", t.port, "err", err)
			writeError(w, relayErr(r.Context(), t.port, err))
		},
	}
	if t.port == EnvdPort {
		if rec := h.newEnvdRecorder(r, sb.ID); rec != nil { // envdledger.go
			rp.ModifyResponse = rec.modifyResponse
		}
		rp.Transport = ag.Transport()
		rp.Rewrite = func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "agent"
			pr.Out.Host = "agent"
		}
	} else {
		port := t.port
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return ag.DialPort(ctx, port)
			},
			// One relay per request: a pooled connection would outlive done().
			DisableKeepAlives:  true,
			DisableCompression: true,
		}
		scheme := "http"
		if slices.Contains(parseHTTPSPorts(sb.Labels[labelHTTPSPorts]), port) {
			// network.httpsPorts: the service speaks TLS. Its certificate
			// is not verified (as on E2B, so self-signed ones work): the
			// connection runs through the sandbox's own agent to its own
			// loopback, and the daemon sends nothing of its own over it.
			scheme = "https"
			tr.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				c, err := ag.DialPort(ctx, port)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}) //nolint:gosec // see above
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, fmt.Errorf("TLS to port %d (listed in httpsPorts): %w", port, err)
				}
				return tc, nil
			}
		}
		rp.Transport = tr
		mask := sb.Labels[labelMaskHost]
		rp.Rewrite = func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			pr.Out.Host = outHost(pr.In.Host, mask, port)
		}
	}
	rp.ServeHTTP(w, r)
}

// routable reports whether a data-plane request may reach the sandbox: it
// runs (or is being created), or it is paused or stopped and was created
// with autoResume, so traffic brings it back as on E2B. Everything else
// (paused without autoResume, stopping, in error, being destroyed) is what
// E2B's proxy cannot route to.
func routable(sb *api.Sandbox) bool {
	switch sb.State {
	case api.StateRunning, api.StateCreating:
		return true
	case api.StatePaused, api.StateHibernated, api.StateStopped:
		return sb.Labels[labelAutoResume] == "true"
	}
	return false
}

// sandboxNotFound is the body of E2B's proxy answer for a sandbox it
// cannot route to.
type sandboxNotFound struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Code      int    `json:"code"`
}

func writeSandboxNotFound(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	_ = json.NewEncoder(w).Encode(sandboxNotFound{SandboxID: truncate(id), Message: "The sandbox was not found", Code: http.StatusBadGateway})
}

// outHost is the Host a sandbox's server sees: the name the client used,
// or network.maskRequestHost with ${PORT} replaced by the port.
func outHost(in, mask string, port int) string {
	if mask == "" {
		return in
	}
	return strings.ReplaceAll(mask, "${PORT}", strconv.Itoa(port))
}

// envdPaths are the agent routes that make up envd's surface; everything
// else the agent serves is Paddock's own and stays behind /v1.
var envdPaths = []string{"/process.Process/", "/filesystem.Filesystem/", "/files", "/health", "/init", "/envs", "/metrics"}

// envdPath allows a request only when its path, as given and as cleaned, is
// one of envd's routes: an allowlist, so encodings and dot segments cannot
// smuggle a request to another agent route.
func envdPath(u *url.URL) bool {
	p := u.Path
	if u.RawPath != "" || p != path.Clean(p) || strings.Contains(p, "//") {
		return false
	}
	for _, e := range envdPaths {
		if strings.HasSuffix(e, "/") && strings.HasPrefix(p, e) && len(p) > len(e) {
			return true
		}
		if p == e {
			return true
		}
	}
	return false
}

// relayErr keeps the agent's error classes (nothing listening on a port
// is unavailable) and calls everything else a bad gateway.
func relayErr(ctx context.Context, port int, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("request canceled: %w", context.Canceled)
	}
	if errdefs.Code(err) != api.CodeInternal {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("port %d: timed out: %w", port, errdefs.ErrDeadlineExceeded)
	}
	return fmt.Errorf("port %d: %v: %w", port, err, errdefs.ErrUnavailable)
}
