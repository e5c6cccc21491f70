package server

import (
	"net/http"
	"strconv"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/processes"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// routesSessions serves shell sessions and background processes
// (docs/sessions.md); exec in a session goes through POST .../exec.
func (s *Server) routesSessions(m *http.ServeMux) {
	m.HandleFunc("POST /v1/sandboxes/{id}/sessions", s.createSession)
	m.HandleFunc("GET /v1/sandboxes/{id}/sessions", s.listSessions)
	m.HandleFunc("DELETE /v1/sandboxes/{id}/sessions/{session}", s.deleteSession)
	m.HandleFunc("POST /v1/sandboxes/{id}/processes", s.startProcess)
	m.HandleFunc("GET /v1/sandboxes/{id}/processes", s.listProcesses)
	m.HandleFunc("GET /v1/sandboxes/{id}/processes/{pid}", s.getProcess)
	m.HandleFunc("GET /v1/sandboxes/{id}/processes/{pid}/logs", s.processLogs)
	m.HandleFunc("POST /v1/sandboxes/{id}/processes/{pid}/kill", s.killProcess)
	m.HandleFunc("POST /v1/sandboxes/{id}/processes/{pid}/wait", s.waitProcess)
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSessionRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	sess, err := s.opts.Controller.Sessions().Create(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sess)
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Controller.Sessions().List(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.SessionList{Sessions: list})
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Controller.Sessions().Delete(r.Context(), r.PathValue("id"), r.PathValue("session")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request) {
	var req api.StartProcessRequest
	if err := s.decode(r, maxJSONBody+maxCmdBody, &req); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.opts.Controller.Processes().Start(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

// maxCmdBody leaves room for a long command line in a start request.
const maxCmdBody = 1 << 20

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Controller.Processes().List(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ProcessList{Processes: list})
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) {
	p, err := s.opts.Controller.Processes().Get(r.Context(), r.PathValue("id"), r.PathValue("pid"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) processLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := processes.LogsOptions{Stream: q.Get("stream")}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, errdefs.Invalid("offset %q: want a byte offset (0 or more)", v))
			return
		}
		o.Offset = n
	}
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, errdefs.Invalid("follow %q: want true or false", v))
			return
		}
		o.Follow = b
	}
	var out *ndjson
	err := s.opts.Controller.Processes().Logs(r.Context(), r.PathValue("id"), r.PathValue("pid"), o, func(ev api.ProcessLogEvent) error {
		if out == nil {
			out = newNDJSON(w)
		}
		return out.send(ev)
	})
	switch {
	case err != nil && out == nil:
		writeError(w, err)
	case out == nil:
		// Nothing kept and not following: an empty stream, still NDJSON.
		newNDJSON(w)
	}
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) {
	var req api.KillProcessRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.opts.Controller.Processes().Kill(r.Context(), r.PathValue("id"), r.PathValue("pid"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) waitProcess(w http.ResponseWriter, r *http.Request) {
	var req api.WaitProcessRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.opts.Controller.Processes().Wait(r.Context(), r.PathValue("id"), r.PathValue("pid"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
