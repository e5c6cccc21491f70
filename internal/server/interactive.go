package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/terminals"
	"github.com/paddock-dev/paddock/internal/controller/watches"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// Bounds on the terminal WebSocket.
const (
	ptyReadLimit    = 1 << 20
	ptyWriteTimeout = 30 * time.Second
	maxQueryValues  = 64
)

var terminalIDRE = lazyre.New(`^t[a-z0-9]{1,31}$`)

func (s *Server) routesInteractive(m *http.ServeMux) {
	m.HandleFunc("GET /v1/sandboxes/{id}/pty", s.pty)
	m.HandleFunc("GET /v1/sandboxes/{id}/terminals", s.listTerminals)
	m.HandleFunc("DELETE /v1/sandboxes/{id}/terminals/{terminal}", s.killTerminal)
	m.HandleFunc("GET /v1/sandboxes/{id}/watch", s.serves(s.opts.Watches != nil, "watches", s.watch))
	m.HandleFunc("POST /v1/sandboxes/{id}/previews", s.serves(s.opts.Previews != nil, "previews", s.expose))
	m.HandleFunc("GET /v1/sandboxes/{id}/previews", s.serves(s.opts.Previews != nil, "previews", s.listPreviews))
	m.HandleFunc("DELETE /v1/sandboxes/{id}/previews/{port}", s.serves(s.opts.Previews != nil, "previews", s.unexpose))
}

func ptyQueryInt(q map[string][]string, name string) (int, error) {
	v := ""
	if vs := q[name]; len(vs) > 0 {
		v = vs[0]
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || len(v) > 6 {
		return 0, errdefs.Invalid("%s=%q: want a number", name, v)
	}
	return n, nil
}

func queryBool(q map[string][]string, name string) (bool, error) {
	if vs := q[name]; len(vs) > 0 && vs[0] != "" {
		b, err := strconv.ParseBool(vs[0])
		if err != nil {
			return false, errdefs.Invalid("%s=%q: want true or false", name, vs[0])
		}
		return b, nil
	}
	return false, nil
}

func terminalOptions(r *http.Request) (terminals.Options, error) {
	q := r.URL.Query()
	var o terminals.Options
	if len(q["cmd"]) > maxQueryValues || len(q["env"]) > maxQueryValues {
		return o, errdefs.Invalid("at most %d cmd and env values", maxQueryValues)
	}
	o.Cmd = q["cmd"]
	o.Cwd = q.Get("cwd")
	o.User = q.Get("user")
	env, err := ptyEnvList(q["env"])
	if err != nil {
		return o, err
	}
	o.Env = env
	if o.Cols, err = ptyQueryInt(q, "cols"); err != nil {
		return o, err
	}
	if o.Rows, err = ptyQueryInt(q, "rows"); err != nil {
		return o, err
	}
	return o, nil
}

func ptyEnvList(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := cutEq(kv)
		if !ok || k == "" {
			return nil, errdefs.Invalid("env %q: want KEY=VALUE", kv)
		}
		env[k] = v
	}
	return env, nil
}

func cutEq(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// pty serves a terminal over a WebSocket: binary frames are terminal bytes
// both ways, text frames are api.PTYMessage control messages. Errors found
// before the upgrade are ordinary HTTP errors.
func (s *Server) pty(w http.ResponseWriter, r *http.Request) {
	var tc *terminals.Conn
	var err error
	if tid := r.URL.Query().Get("terminal"); tid != "" {
		if !terminalIDRE.MatchString(tid) {
			writeError(w, errdefs.Invalid("terminal %q is not a terminal id", tid))
			return
		}
		tc, err = s.opts.Controller.Terminals().Attach(r.Context(), r.PathValue("id"), tid)
	} else {
		var o terminals.Options
		if o, err = terminalOptions(r); err == nil {
			tc, err = s.opts.Controller.Terminals().Open(r.Context(), r.PathValue("id"), o)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	defer tc.Close()
	// "paddock" is chosen when offered (the console offers it beside its
	// key, keys.go); other clients offer none.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"paddock"}})
	if err != nil {
		return // Accept has answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(ptyReadLimit)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	s.servePTY(ctx, conn, tc)
}

func writeMsg(ctx context.Context, conn *websocket.Conn, typ websocket.MessageType, p []byte) error {
	wctx, cancel := context.WithTimeout(ctx, ptyWriteTimeout)
	defer cancel()
	return conn.Write(wctx, typ, p)
}

func writeControl(ctx context.Context, conn *websocket.Conn, m api.PTYMessage) error {
	b, _ := json.Marshal(m)
	return writeMsg(ctx, conn, websocket.MessageText, b)
}

func (s *Server) servePTY(ctx context.Context, conn *websocket.Conn, tc *terminals.Conn) {
	info := tc.Info()
	if err := writeControl(ctx, conn, api.PTYMessage{Type: api.PTYReady, Terminal: &info}); err != nil {
		return
	}
	if rp := tc.Replay(); len(rp) > 0 {
		if err := writeMsg(ctx, conn, websocket.MessageBinary, rp); err != nil {
			return
		}
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		s.readPTY(ctx, conn, tc)
	}()
	for {
		select {
		case p := <-tc.Output():
			if err := writeMsg(ctx, conn, websocket.MessageBinary, p); err != nil {
				return
			}
		case <-tc.Kicked():
			_ = conn.Close(websocket.StatusTryAgainLater, "client fell behind the output; reattach to continue")
			return
		case <-tc.Ended():
			for drained := false; !drained; {
				select {
				case p := <-tc.Output():
					if err := writeMsg(ctx, conn, websocket.MessageBinary, p); err != nil {
						return
					}
				default:
					drained = true
				}
			}
			code, sig, failure := tc.Exit()
			if failure != "" {
				_ = writeControl(ctx, conn, api.PTYMessage{Type: api.PTYError, Error: &api.Error{Code: api.CodeUnavailable, Message: failure}})
				_ = conn.Close(websocket.StatusGoingAway, "terminal lost")
				return
			}
			_ = writeControl(ctx, conn, api.PTYMessage{Type: api.PTYExit, ExitCode: &code, Signal: sig})
			_ = conn.Close(websocket.StatusNormalClosure, "terminal exited")
			return
		case <-readerDone:
			return
		}
	}
}

func (s *Server) readPTY(ctx context.Context, conn *websocket.Conn, tc *terminals.Conn) {
	for {
		typ, p, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if err := tc.Write(ctx, p); err != nil {
				_ = writeControl(ctx, conn, api.PTYMessage{Type: api.PTYError, Error: s.apiError(err)})
			}
			continue
		}
		var m api.PTYMessage
		if err := json.Unmarshal(p, &m); err != nil {
			_ = writeControl(ctx, conn, api.PTYMessage{Type: api.PTYError, Error: s.apiError(errdefs.Invalid("control message is not valid JSON"))})
			continue
		}
		switch m.Type {
		case api.PTYResize:
			err = tc.Resize(ctx, m.Cols, m.Rows)
		case api.PTYSignal:
			err = tc.Signal(ctx, m.Signal)
		default:
			err = errdefs.Invalid("control message type %q: want resize or signal", m.Type)
		}
		if err != nil {
			_ = writeControl(ctx, conn, api.PTYMessage{Type: api.PTYError, Error: s.apiError(err)})
		}
	}
}

// apiError is err as a client may see it in a stream without a
// ResponseWriter: an internal error's details go to the log.
func (s *Server) apiError(err error) *api.Error {
	return &api.Error{Code: errdefs.Code(err), Message: errhttp.PublicMessageTo(internalLog{s.log}, err)}
}

// internalLog logs an internal error's details with its reference.
type internalLog struct{ log *slog.Logger }

func (l internalLog) LogInternal(ref string, err error) {
	l.log.Error("internal error", "reference", ref, "err", err)
}

func (s *Server) listTerminals(w http.ResponseWriter, r *http.Request) {
	ts, err := s.opts.Controller.Terminals().List(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.TerminalList{Terminals: ts})
}

func (s *Server) killTerminal(w http.ResponseWriter, r *http.Request) {
	tid := r.PathValue("terminal")
	if !terminalIDRE.MatchString(tid) {
		writeError(w, errdefs.Invalid("terminal %q is not a terminal id", tid))
		return
	}
	if err := s.opts.Controller.Terminals().Kill(r.Context(), r.PathValue("id"), tid); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// watch streams filesystem changes as NDJSON api.WatchEvent lines.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	recursive, err := queryBool(q, "recursive")
	if err != nil {
		writeError(w, err)
		return
	}
	o := watches.Options{
		Path: q.Get("path"), User: q.Get("user"), Recursive: recursive,
		Include: q["include"], Exclude: q["exclude"],
	}
	var nd *ndjson
	err = s.opts.Watches.Watch(r.Context(), r.PathValue("id"), o, func(ev api.WatchEvent) error {
		if nd == nil {
			nd = newNDJSON(w)
		}
		return nd.send(ev)
	})
	if err != nil && nd == nil {
		writeError(w, err)
	}
}

func (s *Server) expose(w http.ResponseWriter, r *http.Request) {
	var req api.ExposeRequest
	if err := s.decode(r, maxJSONBody, &req); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.opts.Previews.Expose(r.Context(), r.PathValue("id"), req.Port)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, p)
}

func (s *Server) listPreviews(w http.ResponseWriter, r *http.Request) {
	ps, err := s.opts.Previews.List(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PreviewList{Previews: ps})
}

func (s *Server) unexpose(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		writeError(w, errdefs.Invalid("port %q: want a number from 1 to 65535", r.PathValue("port")))
		return
	}
	if err := s.opts.Previews.Unexpose(r.Context(), r.PathValue("id"), port); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
