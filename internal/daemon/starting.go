package daemon

import (
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/paddock-dev/paddock/api"
)

// gate answers on a listener from the moment it opens: 503 with a
// Retry-After while the daemon starts (store, runtimes, networks,
// re-adopting sandboxes take seconds), then the real handler. A client
// that connects during a restart is told to wait, not refused.
type gate struct {
	h atomic.Pointer[http.Handler]
}

// open hands the listener to its real handler.
func (g *gate) open(h http.Handler) { g.h.Store(&h) }

// startingRetryAfter is the Retry-After, in seconds, of a starting answer.
const startingRetryAfter = "1"

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", startingRetryAfter)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	// The status field makes GET /v1/health say "starting"; every other
	// route gets the same answer.
	_ = json.NewEncoder(w).Encode(struct {
		api.Error
		Status string `json:"status"`
	}{api.Error{Code: api.CodeUnavailable, Message: "the daemon is starting (re-adopting its sandboxes); retry in a moment"}, "starting"})
}
