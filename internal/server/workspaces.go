package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/workspaces"
)

// maxImportOverhead allows for an export's manifest and tar headers on
// top of its contents.
const maxImportOverhead = 256 << 20

// maxWorkspaceRunBody bounds POST /v1/workspaces/{id}/run: the command and
// its stdin.
const maxWorkspaceRunBody = 8 << 20

// routesWorkspaces adds workspaces (docs/workspaces.md).
func (s *Server) routesWorkspaces(m *http.ServeMux) {
	m.HandleFunc("POST /v1/workspaces", s.createWorkspace)
	m.HandleFunc("GET /v1/workspaces", s.listWorkspaces)
	m.HandleFunc("GET /v1/workspaces/{id}", s.getWorkspace)
	m.HandleFunc("DELETE /v1/workspaces/{id}", s.deleteWorkspace)
	m.HandleFunc("POST /v1/workspaces/{id}/run", s.runInWorkspace)
	m.HandleFunc("GET /v1/workspaces/{id}/versions", s.workspaceVersions)
	m.HandleFunc("GET /v1/workspaces/{id}/diff", s.workspaceDiff)
	m.HandleFunc("POST /v1/workspaces/{id}/rollback", s.rollbackWorkspace)
	m.HandleFunc("GET /v1/workspaces/{id}/export", s.exportWorkspace)
	m.HandleFunc("POST /v1/workspaces/import", s.importWorkspace)
	m.HandleFunc("GET /v1/workspaces/{id}/files", s.readWorkspaceFile)
	m.HandleFunc("PUT /v1/workspaces/{id}/files", s.writeWorkspaceFile)
	m.HandleFunc("GET /v1/workspaces/{id}/ledger", s.workspaceLedger)
	m.HandleFunc("POST /v1/workspaces/{id}/prune", s.pruneWorkspace)
}

func (s *Server) pruneWorkspace(w http.ResponseWriter, r *http.Request) {
	var req api.WorkspacePruneRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.opts.Workspaces.Prune(r.Context(), r.PathValue("id"), req.Before)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) workspaceLedger(w http.ResponseWriter, r *http.Request) {
	after, limit, err := queryPage(r)
	if err != nil {
		writeError(w, err)
		return
	}
	l, err := s.opts.Workspaces.Ledger(r.Context(), r.PathValue("id"), after, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) readWorkspaceFile(w http.ResponseWriter, r *http.Request) {
	version, err := queryVersion(r, "version")
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := s.opts.Workspaces.ReadFile(r.Context(), r.PathValue("id"), r.URL.Query().Get("path"), version)
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(f.Data)))
	h.Set(api.WorkspaceVersionHeader, strconv.FormatInt(f.Version, 10))
	h.Set(api.FileModeHeader, fmt.Sprintf("%04o", uint32(f.Entry.Mode.Perm())))
	h.Set("Last-Modified", f.Entry.ModTime.UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.Data)
}

func (s *Server) writeWorkspaceFile(w http.ResponseWriter, r *http.Request) {
	mode, err := queryMode(r)
	if err != nil {
		writeError(w, err)
		return
	}
	base, err := queryVersion(r, "base")
	if err != nil {
		writeError(w, err)
		return
	}
	// The file is held in memory until its version lands: under the
	// daemon's body budget, like a JSON body. The workspace bounds it too
	// as it is written (its quota).
	body, err := s.bodies.Open(r, workspaces.MaxWorkspaceFileBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	defer body.Close()
	res, err := s.opts.Workspaces.WriteFile(r.Context(), r.PathValue("id"), r.URL.Query().Get("path"), mode, base, body)
	if berr := body.Err(); berr != nil {
		err = berr
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) exportWorkspace(w http.ResponseWriter, r *http.Request) {
	// Nothing is written before the workspace is found, so a missing one
	// is a plain 404; a failure after the first byte breaks the stream.
	ref := r.PathValue("id")
	if _, err := s.opts.Workspaces.Get(r.Context(), ref); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", `attachment; filename="workspace.tar"`)
	if err := s.opts.Workspaces.Export(r.Context(), ref, w); err != nil {
		s.log.Warn("workspace export broken off", "workspace", ref, "err", err)
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) importWorkspace(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := api.CreateWorkspaceRequest{Name: q.Get("name")}
	var err error
	if req.MaxBytes, err = queryInt(r, "max_bytes"); err != nil {
		writeError(w, err)
		return
	}
	if req.MaxFiles, err = queryInt(r, "max_files"); err != nil {
		writeError(w, err)
		return
	}
	body := http.MaxBytesReader(w, r.Body, workspaces.MaxWorkspaceImportBytes+maxImportOverhead)
	ws, err := s.opts.Workspaces.Import(r.Context(), req, body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, ws)
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) {
	var req api.CreateWorkspaceRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	ws, err := s.opts.Workspaces.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, ws)
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Workspaces.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.WorkspaceList{Workspaces: list})
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := s.opts.Workspaces.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ws)
}

func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Workspaces.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) runInWorkspace(w http.ResponseWriter, r *http.Request) {
	var req api.WorkspaceRunRequest
	if err := s.decode(r, maxWorkspaceRunBody, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.opts.Workspaces.Run(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) workspaceVersions(w http.ResponseWriter, r *http.Request) {
	limit, err := queryInt(r, "limit")
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := s.opts.Workspaces.History(r.Context(), r.PathValue("id"), int(limit))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.WorkspaceHistory{Versions: list})
}

func (s *Server) workspaceDiff(w http.ResponseWriter, r *http.Request) {
	from, err := queryVersion(r, "from")
	if err != nil {
		writeError(w, err)
		return
	}
	to, err := queryVersion(r, "to")
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := s.opts.Workspaces.Diff(r.Context(), r.PathValue("id"), from, to)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) rollbackWorkspace(w http.ResponseWriter, r *http.Request) {
	var req api.WorkspaceRollbackRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.opts.Workspaces.Rollback(r.Context(), r.PathValue("id"), req.Version)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// queryVersion reads a version number from the query, -1 when absent.
func queryVersion(r *http.Request, name string) (int64, error) {
	if !r.URL.Query().Has(name) {
		return -1, nil
	}
	return queryInt(r, name)
}
