package server

import (
	"net/http"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.opts.Controller.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sb)
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	var labels map[string]string
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			writeError(w, errdefs.Invalid("label filter %q: want key=value", l))
			return
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	list, err := s.opts.Controller.List(r.Context(), labels)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.SandboxList{Sandboxes: list})
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.opts.Controller.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Controller.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.opts.Controller.Stop(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.opts.Controller.StartSandbox(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.PauseRequest
	if err := s.decodeOptional(r, &req); err != nil {
		writeError(w, err)
		return
	}
	pause := s.opts.Controller.Pause
	if req.ToDisk {
		pause = s.opts.Controller.Hibernate
	}
	sb, err := pause(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.opts.Controller.Resume(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	h, err := s.opts.Controller.History(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]api.StateChange, 0, len(h))
	for _, c := range h {
		out = append(out, api.StateChange{From: c.From, To: c.To, Reason: c.Reason, At: c.At})
	}
	writeJSON(w, http.StatusOK, api.History{Changes: out})
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := s.decode(r, maxExecBody, &req); err != nil {
		writeError(w, err)
		return
	}
	var out *ndjson
	err := s.opts.Controller.Exec(r.Context(), r.PathValue("id"), req, func(ev api.ExecEvent) error {
		if out == nil {
			out = newNDJSON(w)
		}
		return out.send(ev)
	})
	if err != nil && out == nil {
		writeError(w, err)
	}
}
