package daemon

import (
	"net/http"
	"strings"

	"github.com/paddock-dev/paddock/internal/console"
	"github.com/paddock-dev/paddock/internal/e2b"
)

// tcpRouter is the TCP listener's one top-level router. Four front ends
// share the listener side by side, none wrapping another:
//
//   - a request addressed to a sandbox (E2B's sandbox headers or a
//     {port}-{id}.{domain} host) goes to E2B's data plane, whatever its
//     path: it is the sandbox's traffic;
//   - /v1/... and /mcp go to Paddock's API (internal/server), which
//     authenticates them itself;
//   - / and /console/... go to the web console (internal/console), a
//     page and its assets, public: the page asks for a key and sends it
//     with each API request;
//   - everything else goes to E2B's REST API (internal/e2b).
func tcpRouter(paddockAPI, e2bAPI, con http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case e2b.AddressesSandbox(r):
			e2bAPI.ServeHTTP(w, r)
		case isPaddockPath(r.URL.Path):
			paddockAPI.ServeHTTP(w, r)
		case console.Handles(r.URL.Path):
			con.ServeHTTP(w, r)
		default:
			e2bAPI.ServeHTTP(w, r)
		}
	})
}

// socketRouter is the unix socket's: the API, and the console for
// `paddock console`, which serves the socket on a local port.
func socketRouter(paddockAPI, con http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isPaddockPath(r.URL.Path) && console.Handles(r.URL.Path) {
			con.ServeHTTP(w, r)
			return
		}
		paddockAPI.ServeHTTP(w, r)
	})
}

// isPaddockPath says whether path is Paddock's own API or its MCP endpoint.
func isPaddockPath(path string) bool {
	return path == "/v1" || strings.HasPrefix(path, "/v1/") || path == "/mcp"
}
