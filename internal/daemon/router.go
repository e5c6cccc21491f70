package daemon

import (
	"net/http"
	"strings"

	"github.com/paddock-dev/paddock/internal/e2b"
)

// tcpRouter is the TCP listener's one top-level router. Three front ends
// share the listener side by side, none wrapping another:
//
//   - a request addressed to a sandbox (E2B's sandbox headers or a
//     {port}-{id}.{domain} host) goes to E2B's data plane, whatever its
//     path: it is the sandbox's traffic;
//   - /v1/... and /mcp go to Paddock's API (internal/server), which
//     authenticates them itself;
//   - everything else goes to E2B's REST API (internal/e2b).
func tcpRouter(paddockAPI, e2bAPI http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case e2b.AddressesSandbox(r):
			e2bAPI.ServeHTTP(w, r)
		case isPaddockPath(r.URL.Path):
			paddockAPI.ServeHTTP(w, r)
		default:
			e2bAPI.ServeHTTP(w, r)
		}
	})
}

// isPaddockPath says whether path is Paddock's own API or its MCP endpoint.
func isPaddockPath(path string) bool {
	return path == "/v1" || strings.HasPrefix(path, "/v1/") || path == "/mcp"
}
