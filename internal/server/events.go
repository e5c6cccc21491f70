package server

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Event streams held open at once: each holds a buffer of changes, so a
// caller may not open them without end.
const (
	maxEventStreamsPerCaller = 16
	maxEventStreams          = 512
)

type eventStreams struct {
	mu       sync.Mutex
	byCaller map[string]int
	total    int
}

func (e *eventStreams) acquire(caller string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byCaller == nil {
		e.byCaller = map[string]int{}
	}
	if e.total >= maxEventStreams || e.byCaller[caller] >= maxEventStreamsPerCaller {
		return false
	}
	e.total++
	e.byCaller[caller]++
	return true
}

func (e *eventStreams) release(caller string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.total--
	if e.byCaller[caller]--; e.byCaller[caller] == 0 {
		delete(e.byCaller, caller)
	}
}

func (s *Server) routesEvents(m *http.ServeMux) {
	m.HandleFunc("GET /v1/events", s.events)
	m.HandleFunc("GET /v1/stats", s.stats)
}

// events streams the sandboxes the caller may see as NDJSON api.Event
// lines: a sync, then their changes, with pings between and, with
// ?usage=true, usage samples (api.Event).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	caller := controller.Caller(r.Context())
	if !s.streams.acquire(caller) {
		writeError(w, fmt.Errorf("too many event streams are open: at most %d per caller and %d in all; close one first: %w",
			maxEventStreamsPerCaller, maxEventStreams, errdefs.ErrResourceExhausted))
		return
	}
	defer s.streams.release(caller)
	usage, err := queryBool(r.URL.Query(), "usage")
	if err != nil {
		writeError(w, err)
		return
	}
	sub, list, err := s.opts.Controller.Subscribe(r.Context(), usage)
	if err != nil {
		writeError(w, err)
		return
	}
	defer sub.Close()
	nd := newNDJSON(w)
	// The sync is written with its list always present, empty or not.
	sync := struct {
		Type      string        `json:"type"`
		Sandboxes []api.Sandbox `json:"sandboxes"`
		At        time.Time     `json:"at"`
	}{api.StreamSync, list, time.Now().UTC()}
	if err := nd.send(sync); err != nil {
		return
	}
	ping := time.NewTicker(api.StreamPingInterval)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-sub.Events():
			if err := nd.send(ev); err != nil {
				return
			}
		case <-sub.Lagged():
			// Deliver what was queued, then say the rest was lost.
		drain:
			for {
				select {
				case ev := <-sub.Events():
					if err := nd.send(ev); err != nil {
						return
					}
				default:
					break drain
				}
			}
			_ = nd.send(api.Event{Type: api.StreamLagged, At: time.Now().UTC()})
			return
		case <-ping.C:
			if err := nd.send(api.Event{Type: api.StreamPing, At: time.Now().UTC()}); err != nil {
				return
			}
		}
	}
}

// stats serves GET /v1/stats: the last hour's figures, per minute.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.opts.Controller.HostStats(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
