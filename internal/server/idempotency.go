package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/httpbody"
	"github.com/paddock-dev/paddock/internal/periodic"
	"github.com/paddock-dev/paddock/internal/store"
)

// Idempotency-Key limits. A key is remembered for idemTTL. Requests with a
// key are buffered to fingerprint them, so their bodies are bounded; and
// responses are kept to be replayed, so they are bounded too.
const (
	idemTTL          = 24 * time.Hour
	maxIdemKey       = 255
	maxIdemReqBody   = 8 << 20
	maxIdemRespBody  = 4 << 20
	idemFinishWindow = 10 * time.Second
)

// idempotency runs a mutating call made with an Idempotency-Key once, and
// answers each retry with the first response (status, content type and
// body), also after a daemon restart since outcomes are kept in the store.
// A retry that arrives while the first call runs waits for it.
type idempotency struct {
	store store.IdempotencyStore
	// owner names this daemon run: a record still in progress under
	// another owner was cut short by a restart.
	owner string
	log   *slog.Logger

	mu       sync.Mutex
	inflight map[string]chan struct{}
}

func newIdempotency(st store.IdempotencyStore, log *slog.Logger) *idempotency {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return &idempotency{store: st, owner: hex.EncodeToString(b), log: log, inflight: map[string]chan struct{}{}}
}

// idemPurgeEvery is how often RunRetention forgets expired results.
const idemPurgeEvery = time.Hour

// RunRetention forgets the Idempotency-Key results kept past idemTTL, now
// and then every idemPurgeEvery, until ctx ends. (A retry after expiry
// runs the call again whether or not its record is gone: the purge only
// bounds the store.)
func (s *Server) RunRetention(ctx context.Context) {
	if s.opts.Store != nil {
		periodic.Run(ctx, idemPurgeEvery, s.purgeIdempotency)
	}
}

func (s *Server) purgeIdempotency(ctx context.Context) {
	n, err := s.opts.Store.PurgeIdempotency(ctx, time.Now())
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("idempotency key expiry", "err", err)
	case n > 0:
		s.log.Debug("forgot expired idempotency key results", "records", n)
	}
}

// idempotent wraps next. It sits inside authentication, so the caller's
// credential is known and keys of different callers never meet.
func (s *Server) idempotent(next http.Handler) http.Handler {
	if s.opts.Store == nil {
		return next
	}
	idem := newIdempotency(s.opts.Store, s.log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(api.IdempotencyKeyHeader)
		if len(vals) == 0 || !mutating(r.Method) || !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		key, err := checkIdemKey(vals)
		if err == nil {
			err = idemAllowed(r)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		// Held for the whole call (the fingerprint needs it first, the
		// handler after), so it counts against the body budget until then.
		body, release, err := s.bodies.ReadAll(r, maxIdemReqBody)
		if errors.Is(err, errdefs.ErrPayloadTooLarge) {
			err = idemBodyTooLarge(r.ContentLength)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		defer release()
		r.Body = httpbody.Prebuffered{Reader: bytes.NewReader(body)}
		idem.serve(w, r, next, idemID(r, key), fingerprint(r, body))
	})
}

// idemBodyTooLarge explains the bound on a keyed request's body (size -1:
// the body was sent without a length).
func idemBodyTooLarge(size int64) error {
	what := "this request's body is larger than 8 MiB"
	if size >= 0 {
		what = fmt.Sprintf("this request's body is %d bytes", size)
	}
	return fmt.Errorf("%s, and a request with an %s may carry at most 8 MiB (%d bytes): the daemon holds it in memory "+
		"to fingerprint it, so that a retry can be told from a different request. Send it without the key: a retried file or tar "+
		"upload writes the same content again, but a retried snapshot import makes a second snapshot (look with paddock snapshot ls first): %w",
		what, api.IdempotencyKeyHeader, maxIdemReqBody, errdefs.ErrPayloadTooLarge)
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
		return true
	}
	return false
}

// checkIdemKey accepts one key of 1-255 visible ASCII characters.
func checkIdemKey(vals []string) (string, error) {
	if len(vals) != 1 {
		return "", errdefs.Invalid("send one %s header, not %d", api.IdempotencyKeyHeader, len(vals))
	}
	k := vals[0]
	if k == "" || len(k) > maxIdemKey {
		return "", errdefs.Invalid("%s must be 1-%d characters", api.IdempotencyKeyHeader, maxIdemKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", errdefs.Invalid("%s must be visible ASCII characters (a UUID is a good key)", api.IdempotencyKeyHeader)
		}
	}
	return k, nil
}

// idemAllowed refuses keys where replaying would mean storing a secret.
func idemAllowed(r *http.Request) error {
	if r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == "/v1/keys" {
		return errdefs.Invalid("%s is not accepted on POST /v1/keys: its response carries a secret that is never stored, so it cannot be replayed",
			api.IdempotencyKeyHeader)
	}
	// The stored fingerprint hashes the body: for a secret that would be
	// an unsalted hash of its value in the database. PUT is idempotent anyway.
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/secrets/") {
		return errdefs.Invalid("%s is not accepted on PUT /v1/secrets: setting a secret is idempotent already, and its body is never stored",
			api.IdempotencyKeyHeader)
	}
	return nil
}

// idemID qualifies the key by the caller (the API key the request was
// authenticated with, or the key the MCP server acts for) and its
// credential, hashed, so one caller cannot read another's replies by
// guessing keys, whichever header carries its key.
func idemID(r *http.Request, key string) string {
	h := sha256.New()
	io.WriteString(h, controller.Caller(r.Context()))
	h.Write([]byte{0})
	io.WriteString(h, r.Header.Get("Authorization"))
	h.Write([]byte{0})
	io.WriteString(h, key)
	return hex.EncodeToString(h.Sum(nil))
}

func fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", r.Method, r.URL.Path, r.URL.RawQuery)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func (idem *idempotency) serve(w http.ResponseWriter, r *http.Request, next http.Handler, id, fp string) {
	ctx := r.Context()
	for {
		idem.mu.Lock()
		if ch := idem.inflight[id]; ch != nil {
			idem.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				writeError(w, fmt.Errorf("waiting for the first request with this %s: %w", api.IdempotencyKeyHeader, ctx.Err()))
				return
			}
		}
		now := time.Now().UTC().Round(0)
		rec := &store.IdempotencyRecord{
			Key: id, Fingerprint: fp, Method: r.Method, Path: r.URL.Path, Owner: idem.owner,
			CreatedAt: now, ExpiresAt: now.Add(idemTTL),
		}
		existing, created, err := idem.store.BeginIdempotent(ctx, rec)
		if err != nil {
			idem.mu.Unlock()
			writeError(w, err)
			return
		}
		if created {
			ch := make(chan struct{})
			idem.inflight[id] = ch
			idem.mu.Unlock()
			idem.run(w, r, next, rec, ch)
			return
		}
		idem.mu.Unlock()
		if existing.State == store.IdemInProgress && existing.Owner == idem.owner {
			// Claimed by this run but not in flight here: it is finishing
			// right now; look again shortly.
			select {
			case <-time.After(50 * time.Millisecond):
				continue
			case <-ctx.Done():
				writeError(w, ctx.Err())
				return
			}
		}
		replay(w, existing, fp)
		return
	}
}

// run executes the first request with a key and keeps its response.
func (idem *idempotency) run(w http.ResponseWriter, r *http.Request, next http.Handler, rec *store.IdempotencyRecord, ch chan struct{}) {
	rw := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		p := recover()
		rec.Status, rec.ContentType = rw.status, rw.Header().Get("Content-Type")
		forget := false
		switch {
		case p != nil || rw.failed:
			rec.State = store.IdemAborted
		case notKept(rw.status):
			forget = true
		case rw.overflow:
			rec.State = store.IdemTooLarge
		default:
			rec.State, rec.Body = store.IdemDone, rw.buf.Bytes()
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), idemFinishWindow)
		if forget {
			if err := idem.store.ForgetIdempotent(ctx, rec.Key); err != nil {
				idem.log.Warn("release an idempotency key after a failure", "method", rec.Method, "path", rec.Path, "status", rec.Status, "err", err)
			}
		} else if err := idem.store.FinishIdempotent(ctx, rec); err != nil {
			// The key stays "in progress": a retry is told the outcome is
			// unknown rather than running the call a second time.
			idem.log.Warn("keep idempotent result", "method", rec.Method, "path", rec.Path, "err", err)
		}
		cancel()
		idem.mu.Lock()
		delete(idem.inflight, rec.Key)
		close(ch)
		idem.mu.Unlock()
		if p != nil {
			panic(p)
		}
	}()
	next.ServeHTTP(rw, r)
}

// notKept says whether a response is a failure the daemon does not keep
// for replay: every 5xx (the call could not be done: the sandbox or a store
// was unavailable, an internal error, a deadline) and 429 (a quota or limit
// refused it for now). A retry with the same key runs the call again,
// instead of being told the same failure for 24 hours.
func notKept(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests
}

// replay answers a retry from the kept outcome of the first request.
func replay(w http.ResponseWriter, rec *store.IdempotencyRecord, fp string) {
	h := api.IdempotencyKeyHeader
	if rec.Fingerprint != fp {
		writeError(w, fmt.Errorf("this %s was used for a different request (%s %s with another body or query); "+
			"a key names one request: use a new key for a new request: %w", h, rec.Method, rec.Path, errdefs.ErrConflict))
		return
	}
	switch rec.State {
	case store.IdemDone:
		if rec.ContentType != "" {
			w.Header().Set("Content-Type", rec.ContentType)
		}
		w.Header().Set(api.IdempotentReplayHeader, "true")
		w.Header().Set("Content-Length", strconv.Itoa(len(rec.Body)))
		w.WriteHeader(rec.Status)
		_, _ = w.Write(rec.Body)
	case store.IdemTooLarge:
		writeError(w, fmt.Errorf("the first request with this %s completed (status %d), but its response was larger than %d bytes "+
			"and was not kept; it is not run again: %w", h, rec.Status, maxIdemRespBody, errdefs.ErrConflict))
	case store.IdemAborted:
		writeError(w, fmt.Errorf("the first request with this %s broke off mid-response, so its outcome is unknown; "+
			"it is not run again: check the sandbox and its ledger, then retry with a new key: %w", h, errdefs.ErrConflict))
	default:
		writeError(w, fmt.Errorf("the first request with this %s was in progress when the daemon stopped, so its outcome is unknown; "+
			"it is not run again: check the sandbox and its ledger, then retry with a new key: %w", h, errdefs.ErrConflict))
	}
}

// recordingWriter passes a response through and keeps a copy of it.
type recordingWriter struct {
	http.ResponseWriter
	status   int
	wrote    bool
	buf      bytes.Buffer
	overflow bool
	failed   bool // the client stopped reading: the first caller saw a cut response
}

func (w *recordingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.wrote = true
	if !w.overflow {
		if w.buf.Len()+len(p) > maxIdemRespBody {
			w.overflow = true
			w.buf = bytes.Buffer{}
		} else {
			w.buf.Write(p)
		}
	}
	n, err := w.ResponseWriter.Write(p)
	if err != nil {
		w.failed = true
	}
	return n, err
}

// FlushError is what http.ResponseController uses; a failed flush means
// the client went away.
func (w *recordingWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if err != nil {
		w.failed = true
	}
	return err
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
