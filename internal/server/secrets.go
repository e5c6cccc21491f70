package server

import (
	"net/http"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// maxSecretBody bounds PUT /v1/secrets: a 64 KiB value, JSON-escaped.
const maxSecretBody = 512 << 10

// routesSecrets adds the secret store and credential injection rules.
// No route returns a secret's value. Secret names are per owner: a name
// means the caller's own secret; a caller of scope all may name another
// owner's with ?owner=KEY_ID.
func (s *Server) routesSecrets(m *http.ServeMux) {
	has := s.opts.Secrets != nil
	m.HandleFunc("PUT /v1/secrets/{name}", s.serves(has, "secrets", s.putSecret))
	m.HandleFunc("GET /v1/secrets", s.serves(has, "secrets", s.listSecrets))
	m.HandleFunc("GET /v1/secrets/{name}", s.serves(has, "secrets", s.getSecret))
	m.HandleFunc("DELETE /v1/secrets/{name}", s.serves(has, "secrets", s.deleteSecret))
	m.HandleFunc("POST /v1/sandboxes/{id}/network/injections", s.postInjection)
	m.HandleFunc("DELETE /v1/sandboxes/{id}/network/injections", s.deleteInjection)
}

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	var req api.SetSecretRequest
	if err := s.decode(r, maxSecretBody, &req); err != nil {
		writeError(w, err)
		return
	}
	sec, created, err := s.opts.Secrets.Set(r.Context(), r.URL.Query().Get("owner"), r.PathValue("name"), []byte(req.Value))
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, sec)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Secrets.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if list == nil {
		list = []api.Secret{}
	}
	writeJSON(w, http.StatusOK, api.SecretList{Secrets: list})
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	sec, err := s.opts.Secrets.Get(r.Context(), r.URL.Query().Get("owner"), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sec)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Secrets.Delete(r.Context(), r.URL.Query().Get("owner"), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) postInjection(w http.ResponseWriter, r *http.Request) {
	var req api.Injection
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.opts.Controller.SetInjection(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) deleteInjection(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	host := q.Get("host")
	if host == "" {
		writeError(w, errdefs.Invalid("query parameter host is required"))
		return
	}
	p, err := s.opts.Controller.RemoveInjection(r.Context(), r.PathValue("id"), host, q.Get("header"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}
