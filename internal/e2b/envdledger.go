package e2b

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/ledger"
)

// The data plane relays envd's protocol straight to a sandbox's agent, so
// the daemon sees requests only as bytes going by. To keep the ledger
// complete it copies, passively, the first bytes of the requests that
// change a sandbox (process starts, file writes, removes, moves, mkdirs)
// and decodes them once the agent has answered: a body is never held back,
// buffered beyond one small message, or altered. What cannot be decoded
// (compressed, too large, an unknown encoding) is recorded by its method
// alone, with a note saying why.

// capture passes a body through and keeps a copy of its first max bytes.
type capture struct {
	rc  io.ReadCloser
	max int

	mu   sync.Mutex
	buf  []byte
	over bool // more than max bytes went by
	eof  bool
	done func(c *capture) // called once, at EOF or Close
	once sync.Once
}

func newCapture(rc io.ReadCloser, max int, done func(*capture)) *capture {
	return &capture{rc: rc, max: max, done: done}
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.mu.Lock()
	if n > 0 && !c.over {
		if room := c.max - len(c.buf); n > room {
			c.buf = append(c.buf, p[:room]...)
			c.over = true
		} else {
			c.buf = append(c.buf, p[:n]...)
		}
	}
	if err == io.EOF {
		c.eof = true
	}
	c.mu.Unlock()
	if err == io.EOF {
		c.finish()
	}
	return n, err
}

func (c *capture) Close() error {
	err := c.rc.Close()
	c.finish()
	return err
}

func (c *capture) finish() {
	if c.done != nil {
		c.once.Do(func() { c.done(c) })
	}
}

// seen returns what was kept and whether it is the whole body.
func (c *capture) seen() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...), c.eof && !c.over
}

// envdRecorder records the requests of one relayed call that change the
// sandbox, once the agent has answered them.
type envdRecorder struct {
	h       *Handler
	sandbox string
	user    string
	path    string
	ctype   string
	// compressed: Content-Encoding (unary) or Connect-Content-Encoding /
	// grpc-encoding (enveloped) other than identity.
	compressed bool
	query      string // /files: the path parameter
	req        *capture
}

// newEnvdRecorder returns a recorder for r if it is a recorded request,
// with r.Body wrapped so its first bytes are kept; nil otherwise.
func (h *Handler) newEnvdRecorder(r *http.Request, sandboxID string) *envdRecorder {
	if r.Method != http.MethodPost {
		return nil
	}
	_, rpc := envdKinds[r.URL.Path]
	if !rpc && r.URL.Path != "/files" {
		return nil
	}
	rec := &envdRecorder{h: h, sandbox: sandboxID, path: r.URL.Path, ctype: r.Header.Get("Content-Type")}
	if u, _, ok := r.BasicAuth(); ok {
		rec.user = u
	}
	if rpc {
		for _, k := range []string{"Content-Encoding", "Connect-Content-Encoding", "Grpc-Encoding"} {
			if v := r.Header.Get(k); v != "" && v != "identity" {
				rec.compressed = true
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			rec.req = newCapture(r.Body, maxEnvdMessage, nil)
			r.Body = rec.req
		}
		return rec
	}
	q := r.URL.Query()
	rec.query = q.Get("path")
	if u := q.Get("username"); u != "" {
		rec.user = u
	}
	return rec
}

// modifyResponse records a call the agent answered with success: an RPC
// from its request; an upload from the agent's list of what it wrote,
// read as the answer goes by.
func (rec *envdRecorder) modifyResponse(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	if rec.path == "/files" {
		// Recorded off the relay's path, so the answer is not held up.
		resp.Body = newCapture(resp.Body, maxEnvdMessage, func(c *capture) { go rec.recordUpload(c) })
		return nil
	}
	var body []byte
	complete := false
	if rec.req != nil {
		body, complete = rec.req.seen()
	}
	call := decodeEnvdRequest(rec.path, rec.ctype, body, complete, rec.compressed)
	rec.record(resp.Request.Context(), rec.callEntry(call))
	return nil
}

func (rec *envdRecorder) callEntry(call envdCall) api.LedgerEntry {
	data := map[string]string{"via": "e2b", "method": call.method}
	if call.kind == api.LedgerProcessStart {
		if call.tag != "" {
			data["tag"] = call.tag
		}
		if call.pty {
			data["pty"] = "true"
		}
		e := ledger.CommandEntry(call.kind, call.cmd, rec.user, call.cwd, call.env, data)
		if call.why != "" {
			e.Note = "request not decoded: " + call.why
		}
		return e
	}
	if rec.user != "" {
		data["user"] = rec.user
	}
	if call.source != "" {
		data["source"] = call.source
	}
	e := api.LedgerEntry{Kind: call.kind, Path: call.path, Data: data}
	if call.why != "" {
		e.Note = "request not decoded: " + call.why
	}
	return e
}

// recordUpload writes one file_write entry per file an upload wrote, as
// the agent listed them (at most maxUploadEntries, then a count).
func (rec *envdRecorder) recordUpload(c *capture) {
	body, complete := c.seen()
	var paths []string
	if complete {
		paths = uploadPaths(body)
	}
	data := func() map[string]string {
		d := map[string]string{"via": "e2b", "method": "files"}
		if rec.user != "" {
			d["user"] = rec.user
		}
		return d
	}
	ctx := controller.System(context.Background())
	if paths == nil {
		e := api.LedgerEntry{Kind: api.LedgerFileWrite, Path: rec.query, Data: data(),
			Note: "upload: the list of files written was not read (larger than the relay decodes, or cut off)"}
		rec.record(ctx, e)
		return
	}
	for i, p := range paths {
		if i == maxUploadEntries {
			e := api.LedgerEntry{Kind: api.LedgerFileWrite, Data: data(),
				Note: fmt.Sprintf("upload: %d more files written", len(paths)-i)}
			e.Data["files"] = strconv.Itoa(len(paths) - i)
			rec.record(ctx, e)
			return
		}
		rec.record(ctx, api.LedgerEntry{Kind: api.LedgerFileWrite, Path: p, Data: data()})
	}
}

func (rec *envdRecorder) record(ctx context.Context, e api.LedgerEntry) {
	_ = rec.h.opts.Controller.Record(ctx, rec.sandbox, e)
}
