package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/admission"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

func (s *Server) routesAdmission(m *http.ServeMux) {
	m.HandleFunc("GET /v1/info", s.info)
	m.HandleFunc("GET /v1/policy", s.getPolicy)
	m.HandleFunc("PUT /v1/policy", s.putPolicy)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	in := s.opts.Controller.Info()
	in.Version = s.opts.Version
	if s.opts.Backups != nil {
		in.BackupS3 = s.opts.Backups.S3Info()
	}
	writeJSON(w, http.StatusOK, in)
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.opts.Controller.Policy())
}

// putPolicy replaces the admission policy. Only the unix socket's caller
// (the operator) may: an API key that could rewrite the policy could lift
// its own quota.
func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request) {
	if caller := controller.Caller(r.Context()); caller != api.CallerLocal {
		writeError(w, fmt.Errorf("the admission policy can be changed only over the daemon's unix socket, not with API key %s: %w", caller, errdefs.ErrPermissionDenied))
		return
	}
	data, release, err := s.bodies.ReadAll(r, maxJSONBody)
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := admission.Parse(data)
	release()
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.opts.Controller.SetPolicy(r.Context(), p)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// keyMayManageKeys refuses key management to API keys while a per-key
// quota is set: a key that could mint keys could mint quota.
func (s *Server) keyMayManageKeys(r *http.Request) error {
	if r.URL.Path != "/v1/keys" && !strings.HasPrefix(r.URL.Path, "/v1/keys/") {
		return nil
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if s.opts.Controller.Policy().MaxSandboxesPerKey == 0 {
		return nil
	}
	return fmt.Errorf("admission policy rule max_sandboxes_per_key: while it is set, API keys are created and deleted only over the daemon's unix socket: %w", errdefs.ErrPermissionDenied)
}
