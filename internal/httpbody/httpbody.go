// Package httpbody reads bounded request bodies that must be held in
// memory (JSON documents, idempotency fingerprints) under one budget shared
// by every request of the daemon, so many large bodies at once cannot
// grow the daemon without bound.
//
// A body whose Content-Length is over its route's limit is refused before
// a byte is read; one sent without a length is refused once it passes the
// limit. Either way the refusal is errdefs.ErrPayloadTooLarge (413). The
// budget is taken before reading: a declared length at once, an
// undeclared one as the bytes arrive. A request that cannot get its share
// within MaxWait is refused as unavailable (503) rather than queued
// without end.
package httpbody

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// DefaultBudget is the daemon-wide budget when none is configured.
const DefaultBudget = 128 << 20

// maxWait is how long a request waits for its share of the budget.
const maxWait = 10 * time.Second

// step is how much of the budget a body without a length takes at a time.
const step = 64 << 10

// Budget bounds the body bytes all requests together hold in memory.
type Budget struct {
	size int64
	sem  *semaphore.Weighted
	wait time.Duration
}

// NewBudget returns a budget of size bytes (DefaultBudget if size <= 0).
func NewBudget(size int64) *Budget {
	if size <= 0 {
		size = DefaultBudget
	}
	return &Budget{size: size, sem: semaphore.NewWeighted(size), wait: maxWait}
}

// Size is the budget's capacity in bytes.
func (b *Budget) Size() int64 { return b.size }

// TooLarge is the refusal of a body over limit; size < 0 means the body
// came without a length and was cut off at the limit.
func TooLarge(size, limit int64) error {
	if size >= 0 {
		return fmt.Errorf("request body is %d bytes; this request takes at most %d bytes: %w", size, limit, errdefs.ErrPayloadTooLarge)
	}
	return fmt.Errorf("request body is larger than %d bytes; this request takes at most %d bytes: %w", limit, limit, errdefs.ErrPayloadTooLarge)
}

// Bounds on reading what is left of a refused body.
const (
	maxDrain  = 1 << 30
	drainTime = 30 * time.Second
)

// Drain reads and discards what is left of a refused request's body, at
// most 1 GiB for at most 30 s, after sending the answer. A client still
// sending when the server closes gets a reset (EPIPE on a unix socket)
// instead of the answer waiting for it; draining lets it finish sending
// and read why it was refused. The bytes cost bandwidth, not memory.
func Drain(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(drainTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDrain))
}

// acquire takes n bytes of the budget, waiting at most b.wait.
func (b *Budget) acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if b.sem.TryAcquire(n) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if err := b.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the daemon is holding %d MiB of request bodies, its limit; retry in a moment: %w", b.size>>20, errdefs.ErrUnavailable)
	}
	return nil
}

// Reader is a request body read under the budget. Close gives back what
// it took; it does not close the underlying body (the server does).
type Reader struct {
	b     *Budget
	ctx   context.Context
	r     io.Reader // the body, cut at limit+1
	limit int64
	read  int64
	held  int64 // budget taken
	// prepaid is set when the whole declared length was taken up front.
	prepaid bool
	err     error
}

// Open checks r's declared length against limit, takes the budget for it
// and returns a reader of the body. Close the reader once the bytes read
// are no longer held.
func (b *Budget) Open(r *http.Request, limit int64) (*Reader, error) {
	if r.ContentLength > limit {
		return nil, TooLarge(r.ContentLength, limit)
	}
	br := &Reader{b: b, ctx: r.Context(), r: io.LimitReader(r.Body, limit+1), limit: limit}
	if r.ContentLength >= 0 {
		n := min(r.ContentLength, b.size)
		if err := b.acquire(r.Context(), n); err != nil {
			return nil, err
		}
		br.held, br.prepaid = n, true
	}
	return br, nil
}

func (br *Reader) Read(p []byte) (int, error) {
	if br.err != nil {
		return 0, br.err
	}
	if !br.prepaid {
		// Take budget ahead of the bytes, a step at a time, capped at
		// the whole budget so one body can always finish alone.
		want := min(br.read+int64(len(p)), br.limit+1, br.b.size)
		for br.held < want {
			n := min(int64(step), br.b.size-br.held)
			if err := br.b.acquire(br.ctx, n); err != nil {
				br.err = err
				return 0, err
			}
			br.held += n
		}
		if room := br.held - br.read; br.held < br.b.size && room < int64(len(p)) {
			p = p[:room]
		}
	}
	n, err := br.r.Read(p)
	br.read += int64(n)
	if br.read > br.limit {
		br.err = TooLarge(-1, br.limit)
		return 0, br.err
	}
	return n, err
}

// Err is the reader's own failure (too large, no budget), if it had one,
// for callers whose parser hides the cause.
func (br *Reader) Err() error { return br.err }

// Close gives the budget back.
func (br *Reader) Close() error {
	if br.held > 0 {
		br.b.sem.Release(br.held)
		br.held = 0
	}
	return nil
}

// ReadAll reads a whole body of at most limit bytes. release gives its
// budget back; call it once the bytes are no longer used.
func (b *Budget) ReadAll(r *http.Request, limit int64) (data []byte, release func(), err error) {
	if pre, ok := r.Body.(Prebuffered); ok {
		if int64(pre.Len()) > limit {
			return nil, nil, TooLarge(int64(pre.Len()), limit)
		}
		data, _ := io.ReadAll(pre)
		return data, func() {}, nil
	}
	br, err := b.Open(r, limit)
	if err != nil {
		return nil, nil, err
	}
	if r.ContentLength >= 0 {
		data = make([]byte, 0, r.ContentLength)
	}
	buf := bytesWriter{data}
	if _, err := io.Copy(&buf, br); err != nil {
		br.Close()
		return nil, nil, readError(err)
	}
	return buf.b, func() { br.Close() }, nil
}

// Prebuffered is a body already read into memory under the budget;
// DecodeJSON reads it without counting it twice.
type Prebuffered struct{ *bytes.Reader }

// Close does nothing: the bytes are the holder's to release.
func (Prebuffered) Close() error { return nil }

type bytesWriter struct{ b []byte }

func (w *bytesWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readError keeps the vocabulary's errors and calls anything else a
// broken upload.
func readError(err error) error {
	if errors.Is(err, errdefs.ErrPayloadTooLarge) || errors.Is(err, errdefs.ErrUnavailable) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errdefs.Invalid("read the request body: %v", err)
}

// DecodeOptions tune DecodeJSON.
type DecodeOptions struct {
	// AllowUnknown accepts fields the target does not have.
	AllowUnknown bool
	// AllowEmpty accepts an empty body, leaving v as it was.
	AllowEmpty bool
}

// DecodeJSON decodes one JSON value of at most limit bytes from r's body
// into v, refusing trailing data. The budget is held while decoding only.
func (b *Budget) DecodeJSON(r *http.Request, limit int64, v any, o DecodeOptions) error {
	var body io.Reader
	if pre, ok := r.Body.(Prebuffered); ok {
		// Already in memory and counted (the idempotency layer read it).
		if int64(pre.Len()) > limit {
			return TooLarge(int64(pre.Len()), limit)
		}
		body = pre
	} else {
		br, err := b.Open(r, limit)
		if err != nil {
			return err
		}
		defer br.Close()
		body = br
	}
	dec := json.NewDecoder(body)
	if !o.AllowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		switch {
		case errors.Is(err, io.EOF) && o.AllowEmpty:
			return nil
		case errors.Is(err, io.EOF):
			return errdefs.Invalid("request body is empty; expected a JSON object")
		case errors.Is(err, errdefs.ErrPayloadTooLarge), errors.Is(err, errdefs.ErrUnavailable),
			errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return err
		}
		return errdefs.Invalid("request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return errdefs.Invalid("request body has data after the JSON object")
	}
	return nil
}
