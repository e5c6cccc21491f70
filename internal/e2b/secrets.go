package e2b

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// E2B's secrets are Paddock's (docs/networking.md, Credential injection):
// kept by the daemon, encrypted, never returned. A secret's E2B id is
// "sec_" and its name; E2B reserves that prefix for ids, so a name never
// starts with it. Paddock keeps one value per secret and no metadata:
// currentVersion is always 1, metadata always empty, and a request that
// sets metadata is refused.
const secretIDPrefix = "sec_"

// secretInfo is E2B's Secret: never the value.
type secretInfo struct {
	SecretID       string            `json:"secretID"`
	Name           string            `json:"name"`
	CurrentVersion int64             `json:"currentVersion"`
	Metadata       map[string]string `json:"metadata"`
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
}

// secretBody is E2B's NewSecret and SecretUpdate.
type secretBody struct {
	Name     string            `json:"name,omitempty"`
	Value    *string           `json:"value,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func toSecretInfo(s *api.Secret) secretInfo {
	return secretInfo{SecretID: secretIDPrefix + s.Name, Name: s.Name, CurrentVersion: 1, Metadata: map[string]string{}, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// secretName checks a new secret's name: lower-cased, as E2B stores it,
// then held to Paddock's rule for names.
func secretName(raw string) (string, error) {
	name := strings.ToLower(raw)
	if strings.HasPrefix(name, secretIDPrefix) {
		return "", errdefs.Invalid("secret name %q: the prefix %s is reserved for secret ids", truncate(raw), secretIDPrefix)
	}
	if err := egress.ValidSecretName(name); err != nil {
		return "", err
	}
	return name, nil
}

// secretRef reads a path's secret id or name: an id is sec_ and a name.
func secretRef(ref string) string {
	if n, ok := strings.CutPrefix(ref, secretIDPrefix); ok {
		return n
	}
	return strings.ToLower(ref)
}

func checkSecretBody(b *secretBody) ([]byte, error) {
	if len(b.Metadata) > 0 {
		return nil, errdefs.Invalid("secret metadata is not supported: Paddock keeps a secret's name and value only")
	}
	if b.Value == nil {
		return nil, errdefs.Invalid("value is required")
	}
	v := []byte(*b.Value)
	if err := egress.ValidSecretValue(v); err != nil {
		return nil, err
	}
	return v, nil
}

// withSecrets is h on a handler built with the secrets subsystem; on one
// built without it, the secrets API says it is not served.
func (h *Handler) withSecrets(hf http.HandlerFunc) http.HandlerFunc {
	if h.opts.Secrets != nil {
		return hf
	}
	return func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("this daemon does not serve secrets: %w", errdefs.ErrUnavailable))
	}
}

// findSecret returns the caller's own secret of that name, or nil.
// Secret names are per owner: another owner's of the same name is not
// this caller's, whatever its scope.
func (h *Handler) findSecret(r *http.Request, name string) (*api.Secret, error) {
	if egress.ValidSecretName(name) != nil {
		return nil, nil
	}
	s, err := h.opts.Secrets.Get(r.Context(), "", name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, nil
	}
	return s, err
}

// createSecret: POST /secrets. A name in use is a 409 (E2B's create never
// replaces; update does).
func (h *Handler) createSecret(w http.ResponseWriter, r *http.Request) {
	h.storeSecret(w, r, func(body *secretBody) (string, error) { return secretName(body.Name) },
		func(name string, old *api.Secret) error {
			if old != nil {
				return fmt.Errorf("a secret named %q exists; update it (Secret.update) or choose another name: %w", name, errdefs.ErrConflict)
			}
			return nil
		}, http.StatusCreated)
}

// updateSecret: POST /secrets/{id} replaces the value of an existing
// secret; rules that name it use the new value from their next request.
func (h *Handler) updateSecret(w http.ResponseWriter, r *http.Request) {
	h.storeSecret(w, r, func(*secretBody) (string, error) { return secretRef(r.PathValue("id")), nil },
		func(_ string, old *api.Secret) error {
			if old == nil {
				return errdefs.NotFound("secret %q", truncate(r.PathValue("id")))
			}
			return nil
		}, http.StatusOK)
}

// storeSecret is create and update: the body's value is checked, the
// secret named is looked up and judged by allow, and the value stored;
// the lookup and the store are one step against this API's other writers.
func (h *Handler) storeSecret(w http.ResponseWriter, r *http.Request, nameOf func(*secretBody) (string, error), allow func(string, *api.Secret) error, status int) {
	var body secretBody
	if err := h.decode(r, &body); err != nil {
		writeError(w, err)
		return
	}
	name, err := nameOf(&body)
	if err != nil {
		writeError(w, err)
		return
	}
	value, err := checkSecretBody(&body)
	if err != nil {
		writeError(w, err)
		return
	}
	h.secretsMu.Lock()
	defer h.secretsMu.Unlock()
	old, err := h.findSecret(r, name)
	if err == nil {
		err = allow(name, old)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s, _, err := h.opts.Secrets.Set(r.Context(), "", name, value)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, toSecretInfo(s))
}

func (h *Handler) getSecret(w http.ResponseWriter, r *http.Request) {
	s, err := h.findSecret(r, secretRef(r.PathValue("id")))
	if err == nil && s == nil {
		err = errdefs.NotFound("secret %q", truncate(r.PathValue("id")))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSecretInfo(s))
}

// deleteSecret: DELETE /secrets/{id}. A secret that a sandbox's rules
// still name is kept (409, naming the sandboxes), where E2B would revoke it.
func (h *Handler) deleteSecret(w http.ResponseWriter, r *http.Request) {
	name := secretRef(r.PathValue("id"))
	if err := egress.ValidSecretName(name); err != nil {
		writeError(w, errdefs.NotFound("secret %q", truncate(r.PathValue("id"))))
		return
	}
	if err := h.opts.Secrets.Delete(r.Context(), "", name); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listSecrets: GET /secrets?limit=&nextToken=, by name, paged with
// x-next-token. Only the caller's own secrets are listed, whatever its
// scope: an E2B secret id is its name, which is unique per owner only.
func (h *Handler) listSecrets(w http.ResponseWriter, r *http.Request) {
	limit, after, err := parseSecretQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := h.opts.Secrets.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	me := controller.Caller(r.Context())
	list = slices.DeleteFunc(list, func(s api.Secret) bool { return s.CreatedBy != me })
	slices.SortFunc(list, func(a, b api.Secret) int { return strings.Compare(a.Name, b.Name) })
	page := make([]secretInfo, 0, min(limit, len(list)))
	for i := range list {
		if list[i].Name <= after {
			continue
		}
		if len(page) == limit {
			w.Header().Set(nextTokenHeader, base64.RawURLEncoding.EncodeToString([]byte(page[len(page)-1].Name)))
			break
		}
		page = append(page, toSecretInfo(&list[i]))
	}
	writeJSON(w, http.StatusOK, page)
}

func parseSecretQuery(q url.Values) (limit int, after string, err error) {
	limit = defaultPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return 0, "", errdefs.Invalid("limit %q: want 1 to %d", truncate(v), maxPageSize)
		}
		limit = n
	}
	if v := q.Get("nextToken"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(v) > 128 || egress.ValidSecretName(string(b)) != nil {
			return 0, "", errdefs.Invalid("nextToken is not a token this server issued")
		}
		after = string(b)
	}
	return limit, after, nil
}
