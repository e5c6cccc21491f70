// Package paddocktest is an in-memory stand-in for the Paddock daemon's REST
// API, for testing programs that use the Go SDK without a daemon, runc or
// root. It keeps sandboxes and their files in memory and runs no processes:
// what an exec does is decided by the test's ExecFunc.
package paddocktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// ExecFunc decides what a command does: it writes output with emit
// (stdout/stderr events) and returns the end event.
type ExecFunc func(sb *api.Sandbox, req api.ExecRequest, emit func(api.ExecEvent)) api.ExecEvent

// File is one entry of a sandbox's in-memory filesystem.
type File struct {
	Dir     bool
	Symlink string
	Data    []byte
	Mode    uint32
}

// Server is a fake daemon. Its fields may be set before the first request.
type Server struct {
	*httptest.Server
	// Exec runs commands; nil uses DefaultExec.
	Exec ExecFunc
	// APIKey, when set, is required as a bearer token.
	APIKey string

	mu        sync.Mutex
	sandboxes map[string]*api.Sandbox
	files     map[string]map[string]*File // sandbox id -> path -> file
	keys      map[string]api.Key
	images    []api.Image
	nextID    int
	// Requests counts requests by "METHOD path".
	requests map[string]int
}

// NewServer starts a fake daemon on a loopback TCP port. Close it when done.
func NewServer() *Server {
	s := &Server{
		sandboxes: map[string]*api.Sandbox{},
		files:     map[string]map[string]*File{},
		keys:      map[string]api.Key{},
		requests:  map[string]int{},
		images: []api.Image{{Name: "base", Digest: "sha256:" + strings.Repeat("ab", 32), SizeBytes: 150 << 20,
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Client returns an SDK client pointed at the fake.
func (s *Server) Client() *paddock.Client {
	return &paddock.Client{URL: s.URL, APIKey: s.APIKey}
}

// Sandboxes returns the ids of the sandboxes that exist, sorted.
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.sandboxes))
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Requests returns how many requests matched "METHOD /v1/..." so far; a
// request with a user parameter is counted as "METHOD /v1/... user=NAME".
func (s *Server) Requests(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[key]
}

// SetImages replaces the list of built images (at start: base alone).
// With none, a client that builds its image on first use has to build it.
func (s *Server) SetImages(images ...api.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images = append([]api.Image(nil), images...)
}

// File returns a copy of a file in a sandbox, or nil.
func (s *Server) File(id, p string) *File {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[id][p]
	if f == nil {
		return nil
	}
	c := *f
	c.Data = bytes.Clone(f.Data)
	return &c
}

// PutFile places a file (creating parent directories) in a sandbox.
func (s *Server) PutFile(id, p string, f File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(id, p, &f)
}

func (s *Server) put(id, p string, f *File) {
	fs := s.files[id]
	for dir := path.Dir(p); dir != "/" && dir != "."; dir = path.Dir(dir) {
		if fs[dir] == nil {
			fs[dir] = &File{Dir: true, Mode: 0o755}
		}
	}
	fs[p] = f
}

// DefaultExec understands a few commands: "echo ARGS...", "cat" (stdin to
// stdout), "exit N", "kill SIGNAME", "sleep-timeout" and "fail" (an end
// event with an error). Anything else exits 127.
func DefaultExec(_ *api.Sandbox, req api.ExecRequest, emit func(api.ExecEvent)) api.ExecEvent {
	code := func(n int) *int { return &n }
	switch req.Cmd[0] {
	case "echo":
		emit(api.ExecEvent{Type: api.EventStdout, Data: []byte(strings.Join(req.Cmd[1:], " ") + "\n")})
		return api.ExecEvent{Type: api.EventEnd, ExitCode: code(0)}
	case "cat":
		emit(api.ExecEvent{Type: api.EventStdout, Data: req.Stdin})
		return api.ExecEvent{Type: api.EventEnd, ExitCode: code(0)}
	case "exit":
		n := 0
		if len(req.Cmd) > 1 {
			n, _ = strconv.Atoi(req.Cmd[1])
		}
		emit(api.ExecEvent{Type: api.EventStderr, Data: []byte("exiting\n")})
		return api.ExecEvent{Type: api.EventEnd, ExitCode: code(n)}
	case "kill":
		return api.ExecEvent{Type: api.EventEnd, ExitCode: code(-1), Signal: req.Cmd[1]}
	case "sleep-timeout":
		return api.ExecEvent{Type: api.EventEnd, ExitCode: code(-1), Signal: "SIGKILL", TimedOut: true}
	case "fail":
		return api.ExecEvent{Type: api.EventEnd, Error: &api.Error{Code: api.CodeUnavailable, Message: "agent went away"}}
	}
	emit(api.ExecEvent{Type: api.EventStderr, Data: []byte(req.Cmd[0] + ": command not found\n")})
	return api.ExecEvent{Type: api.EventEnd, ExitCode: code(127)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Code: code, Message: msg})
}

var errBadTar = errors.New("bad tar")

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		writeErr(w, http.StatusUnauthorized, api.CodeUnauthenticated, "missing or wrong API key")
		return
	}
	s.mu.Lock()
	key := r.Method + " " + r.URL.Path
	if u := r.URL.Query().Get("user"); u != "" {
		key += " user=" + u
	}
	s.requests[key]++
	s.mu.Unlock()
	// Work on the escaped path so an escaped '/' inside an id stays inside it.
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/v1/"), "/")
	for i, p := range parts {
		parts[i], _ = unescape(p)
	}
	switch {
	case len(parts) == 1 && parts[0] == "health":
		writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: "test", Runtimes: []string{api.RuntimeRunc}, DefaultImage: "base"})
	case len(parts) == 1 && parts[0] == "sandboxes":
		switch r.Method {
		case http.MethodPost:
			s.create(w, r)
		case http.MethodGet:
			s.list(w, r)
		default:
			writeErr(w, http.StatusMethodNotAllowed, api.CodeInvalidArgument, "method not allowed")
		}
	case len(parts) >= 2 && parts[0] == "sandboxes":
		s.sandbox(w, r, parts[1], strings.Join(parts[2:], "/"))
	case len(parts) == 1 && parts[0] == "images" && r.Method == http.MethodGet:
		s.mu.Lock()
		writeJSON(w, http.StatusOK, api.ImageList{Images: s.images})
		s.mu.Unlock()
	case len(parts) == 3 && parts[0] == "images" && parts[2] == "build" && r.Method == http.MethodPost:
		s.build(w, parts[1])
	case len(parts) == 1 && parts[0] == "keys":
		s.keysRoot(w, r)
	case len(parts) == 2 && parts[0] == "keys" && r.Method == http.MethodDelete:
		s.mu.Lock()
		_, ok := s.keys[parts[1]]
		delete(s.keys, parts[1])
		s.mu.Unlock()
		if !ok {
			writeErr(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("key %q not found", parts[1]))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeErr(w, http.StatusNotFound, api.CodeNotFound, "no route "+r.Method+" "+r.URL.Path)
	}
}
