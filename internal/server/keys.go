package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/console"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
	"github.com/paddock-dev/paddock/internal/store"
)

// KeyPrefix starts every Paddock API key, so a leaked key is recognisable
// by secret scanners.
const KeyPrefix = "pdk_"

// E2BKeyPrefix starts keys made for E2B's SDKs, in E2B's own key format.
const E2BKeyPrefix = "e2b_"

var keyNameRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// HashKey is how a key's secret is stored and looked up.
func HashKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// requireKey admits a request only with a valid API key, given as
// "Authorization: Bearer <key>" or "X-API-Key: <key>".
func (s *Server) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/health" {
			next.ServeHTTP(w, r)
			return
		}
		secret := r.Header.Get("X-API-Key")
		if auth := r.Header.Get("Authorization"); secret == "" && auth != "" {
			if b, ok := strings.CutPrefix(auth, "Bearer "); ok {
				secret = strings.TrimSpace(b)
			}
		}
		if secret == "" {
			secret = console.WebSocketBearer(r) // a browser's terminal
		}
		if secret == "" || len(secret) > 256 {
			writeError(w, errdefs.ErrUnauthenticatedf("an API key is required on this listener (Authorization: Bearer <key>); create one with `paddock keys create NAME`"))
			return
		}
		k, err := s.opts.Store.KeyByHash(r.Context(), HashKey(secret))
		if err != nil {
			writeError(w, errdefs.ErrUnauthenticatedf("the API key is not valid"))
			return
		}
		if err := s.keyMayManageKeys(r); err != nil { // admission.go
			writeError(w, err)
			return
		}
		// The caller's key id is what admission counts quotas by and what
		// owns what it creates; its scope is what it may see.
		next.ServeHTTP(w, r.WithContext(controller.WithCaller(r.Context(), k.ID, k.Scope)))
	})
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var req api.CreateKeyRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if !keyNameRE.MatchString(req.Name) {
		writeError(w, errdefs.Invalid("key name %q: use 1-63 letters, digits, '-', '_' or '.'", req.Name))
		return
	}
	scope := req.Scope
	switch scope {
	case "":
		scope = api.KeyScopeOwn
	case api.KeyScopeOwn, api.KeyScopeAll:
	default:
		writeError(w, errdefs.Invalid("key scope %.40q: want %s or %s", req.Scope, api.KeyScopeOwn, api.KeyScopeAll))
		return
	}
	if scope == api.KeyScopeAll && controller.CallerScope(r.Context()) != api.KeyScopeAll {
		// A key that could mint a key of scope all could see everything.
		writeError(w, fmt.Errorf("API key %s has scope own and may create only keys of scope own: %w", controller.Caller(r.Context()), errdefs.ErrPermissionDenied))
		return
	}
	prefix := KeyPrefix
	switch req.Format {
	case "", api.KeyFormatPaddock:
	case api.KeyFormatE2B:
		prefix = E2BKeyPrefix
	default:
		writeError(w, errdefs.Invalid("key format %q: want %s or %s", req.Format, api.KeyFormatPaddock, api.KeyFormatE2B))
		return
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := prefix + hex.EncodeToString(raw)
	idb := make([]byte, 8)
	_, _ = rand.Read(idb)
	k := &store.Key{
		ID:         hex.EncodeToString(idb),
		Name:       req.Name,
		Prefix:     secret[:len(prefix)+6],
		SecretHash: HashKey(secret),
		Scope:      scope,
		CreatedBy:  controller.Caller(r.Context()),
		CreatedAt:  time.Now().UTC(),
	}
	if err := s.opts.Store.CreateKey(r.Context(), k); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.CreatedKey{Key: toAPIKey(k), Secret: secret})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.opts.Store.ListKeys(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := api.KeyList{Keys: make([]api.Key, 0, len(keys))}
	for _, k := range keys {
		if mayManageKey(r, k) {
			out.Keys = append(out.Keys, toAPIKey(k))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if controller.CallerScope(r.Context()) != api.KeyScopeAll {
		// A key's creator never changes, so reading it first is not a race.
		k, err := s.opts.Store.GetKey(r.Context(), id)
		if err == nil && !mayManageKey(r, k) {
			err = errdefs.NotFound("key %q", id) // as the store says of a missing key
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	if err := s.opts.Store.DeleteKey(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// mayManageKey is whether r's caller sees and may delete k: the unix socket
// and keys of scope all manage every key; a key of scope own only the keys
// it created. Any other key does not exist for it, the key itself
// included: a key that could delete its creator's siblings, or list them,
// would learn who else uses the daemon.
func mayManageKey(r *http.Request, k *store.Key) bool {
	ctx := r.Context()
	if controller.CallerScope(ctx) == api.KeyScopeAll {
		return true
	}
	return k.CreatedBy != "" && k.CreatedBy == controller.Caller(ctx)
}

func toAPIKey(k *store.Key) api.Key {
	return api.Key{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Scope: k.Scope, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt}
}
