package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/paddock-dev/paddock/internal/controller"
)

// inProcessHost is the host of requests an in-daemon client (the MCP
// server) sends through inProcess; nothing dials it.
const inProcessHost = "paddock.in-process"

// inProcess is an http.RoundTripper that serves each request with the
// API's own handler chain inside the daemon, as the given caller: no
// socket, no connection, no header that names a caller. The request goes
// through the same routes, body bounds and error mapping as one from
// outside, so an in-daemon client can do nothing the REST API would not
// let that caller do. Response bodies stream: a handler's writes reach
// the client as it reads them.
type inProcess struct {
	h      http.Handler
	caller string
	scope  string
}

// inProcess returns a transport acting for caller with scope.
func (s *Server) inProcess(caller, scope string) http.RoundTripper {
	return inProcess{h: s.logRequests(s.idempotent(s.mux)), caller: caller, scope: scope}
}

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := controller.WithCaller(r.Context(), t.caller, t.scope)
	req := r.Clone(ctx)
	req.RequestURI = r.URL.RequestURI()
	req.RemoteAddr = "in-process"
	req.Host = inProcessHost
	if req.Body == nil {
		req.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				// As net/http does for a handler that panics: the answer
				// breaks off, and the daemon lives on.
				pw.CloseWithError(fmt.Errorf("in-process handler panicked: %v", p))
				w.headerDone()
				return
			}
			w.headerDone() // a handler that wrote nothing answered 200
			pw.Close()
		}()
		t.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pr,
		ContentLength: -1,
		Request:       r,
	}, nil
}

// pipeResponse is the http.ResponseWriter of an in-process request: the
// status and headers are taken at the first WriteHeader or Write, the
// body goes through a pipe to the client.
type pipeResponse struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

// headerDone sends the headers if nothing did (status 200).
func (w *pipeResponse) headerDone() { w.WriteHeader(http.StatusOK) }

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.headerDone()
	n, err := w.body.Write(b)
	if errors.Is(err, io.ErrClosedPipe) {
		err = fmt.Errorf("the in-process client stopped reading: %w", err)
	}
	return n, err
}

// Flush is a no-op: every Write already reaches the reader.
func (w *pipeResponse) Flush() {}
