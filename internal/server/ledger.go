package server

import (
	"net/http"
	"strconv"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// routesLedger adds the ledger routes.
func (s *Server) routesLedger(m *http.ServeMux) {
	has := s.opts.Ledgers != nil
	m.HandleFunc("GET /v1/sandboxes/{id}/ledger", s.serves(has, "ledgers", s.getLedger))
	m.HandleFunc("POST /v1/sandboxes/{id}/ledger", s.serves(has, "ledgers", s.addLedger))
}

func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errdefs.Invalid("%s=%q: want a non-negative integer", name, v)
	}
	return n, nil
}

// queryPage reads a ledger page's after and limit (limit capped where
// the callee's own bound refuses or cuts it anyway).
func queryPage(r *http.Request) (after int64, limit int, err error) {
	if after, err = queryInt(r, "after"); err != nil {
		return 0, 0, err
	}
	n, err := queryInt(r, "limit")
	if err != nil {
		return 0, 0, err
	}
	return after, int(min(n, 1<<20)), nil
}

func (s *Server) getLedger(w http.ResponseWriter, r *http.Request) {
	after, limit, err := queryPage(r)
	if err != nil {
		writeError(w, err)
		return
	}
	l, err := s.opts.Ledgers.Page(r.Context(), r.PathValue("id"), after, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) addLedger(w http.ResponseWriter, r *http.Request) {
	var req api.AddLedgerEntryRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	e, err := s.opts.Ledgers.Add(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, e)
}
