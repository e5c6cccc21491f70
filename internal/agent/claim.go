package agent

import (
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/paddock-dev/paddock/internal/agent/wire"
)

// A warm pool's pods are started by the cluster from one template before
// anyone asks for them, so they cannot be given a secret of their own at
// start. Their agent starts unclaimed, with the pool's token: it answers
// nothing but one claim, which proves the pool's token and gives the
// agent the sandbox's own token. From then on only that token works; the
// pool's is forgotten, and a second claim is refused. A daemon that
// cannot claim a pod (someone else claimed it first) must not use it.

// EnvPoolToken names the variable that carries a warm pool's token to an
// unclaimed agent listening on TCP (instead of EnvToken).
const EnvPoolToken = wire.EnvPoolToken

// ClaimPath is where an unclaimed agent takes its claim: a POST carrying
// the pool's token in TokenHeader and a ClaimRequest.
const ClaimPath = wire.ClaimPath

// ClaimRequest gives an agent the token it wants from then on.
type ClaimRequest = wire.ClaimRequest

// tokenGate holds the token requests must carry. An unclaimed gate (a
// pool's) has no token yet, only the pool's, which opens nothing but the
// claim. The agent keeps one gate for its life, so a claim outlives a
// detach and attach (detach.go), which makes a new server.
type tokenGate struct {
	mu   sync.Mutex
	tok  []byte // nil until claimed
	pool []byte // nil once claimed (or never in a pool)
}

func newTokenGate(token, poolToken string) *tokenGate {
	g := &tokenGate{}
	if token != "" {
		g.tok = []byte(token)
	} else {
		g.pool = []byte(poolToken)
	}
	return g
}

// wrap admits to next the requests that carry the gate's token.
func (g *tokenGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get(TokenHeader))
		if len(got) > maxTokenLen {
			http.Error(w, "agent token missing or wrong", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == ClaimPath {
			g.claim(w, r, got)
			return
		}
		if r.URL.Path == wire.StartedPath && r.Method == http.MethodGet {
			// The kubelet's readiness probe carries no token; the
			// answer is ready or not, nothing else.
			next.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		tok := g.tok
		g.mu.Unlock()
		if tok == nil {
			http.Error(w, "agent not claimed yet", http.StatusUnauthorized)
			return
		}
		if subtle.ConstantTimeCompare(got, tok) != 1 {
			http.Error(w, "agent token missing or wrong", http.StatusUnauthorized)
			return
		}
		r.Header.Del(TokenHeader)
		next.ServeHTTP(w, r)
	})
}

func (g *tokenGate) claim(w http.ResponseWriter, r *http.Request, got []byte) {
	if r.Method != http.MethodPost {
		http.Error(w, "claim with POST", http.StatusMethodNotAllowed)
		return
	}
	var req ClaimRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil {
		http.Error(w, "claim: want {\"token\": ...}", http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pool == nil {
		http.Error(w, "agent already claimed", http.StatusConflict)
		return
	}
	if subtle.ConstantTimeCompare(got, g.pool) != 1 {
		http.Error(w, "pool token missing or wrong", http.StatusUnauthorized)
		return
	}
	if len(req.Token) < 32 || len(req.Token) > maxTokenLen || subtle.ConstantTimeCompare([]byte(req.Token), g.pool) == 1 {
		http.Error(w, "claim: the new token must be 32 to 256 characters and not the pool's", http.StatusBadRequest)
		return
	}
	g.tok, g.pool = []byte(req.Token), nil
	w.WriteHeader(http.StatusNoContent)
}
