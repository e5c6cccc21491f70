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
// without end. With shares (SetShares), each caller also holds at most its
// share of the budget, so one tenant's bodies cannot take all of it from
// the others.
package httpbody

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
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

	// Per-caller shares (SetShares): keyOf names a request's caller, ""
	// for one whose bodies count against the whole budget only.
	keyOf func(context.Context) string
	share int64
	mu    sync.Mutex
	keys  map[string]*keyShare
}

// keyShare is what one caller's open bodies hold of its share; it lives
// while any of them is open.
type keyShare struct {
	key   string
	sem   *semaphore.Weighted
	users int
}

// SetShares bounds what the bodies of one caller hold together to share
// bytes (at most the budget; half of it if share <= 0). keyOf names the
// caller of a request's context, "" for a caller not bounded this way (the
// daemon's operator). Call it before the budget is used.
func (b *Budget) SetShares(keyOf func(context.Context) string, share int64) {
	if share <= 0 || share > b.size {
		share = b.size / 2
	}
	b.keyOf, b.share, b.keys = keyOf, share, map[string]*keyShare{}
}

// Share is what one caller's bodies may hold together, or the whole
// budget without shares.
func (b *Budget) Share() int64 {
	if b.keyOf == nil {
		return b.size
	}
	return b.share
}

// join returns ctx's caller's share, counting one more open body, or nil
// when the caller is not bounded by a share.
func (b *Budget) join(ctx context.Context) *keyShare {
	if b.keyOf == nil {
		return nil
	}
	key := b.keyOf(ctx)
	if key == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil {
		ks = &keyShare{key: key, sem: semaphore.NewWeighted(b.share)}
		b.keys[key] = ks
	}
	ks.users++
	return ks
}

// leave undoes join once its body holds nothing.
func (b *Budget) leave(ks *keyShare) {
	if ks == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if ks.users--; ks.users == 0 {
		delete(b.keys, ks.key)
	}
}

// capacity is the most one body of ks's caller may hold at once.
func (b *Budget) capacity(ks *keyShare) int64 {
	if ks != nil {
		return b.share
	}
	return b.size
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

// acquire takes n bytes of ks's share (when ks is not nil), then of the
// budget, waiting at most b.wait for both together.
func (b *Budget) acquire(ctx context.Context, ks *keyShare, n int64) error {
	if n <= 0 {
		return nil
	}
	var (
		wctx   context.Context
		cancel context.CancelFunc
	)
	wait := func() context.Context {
		if wctx == nil {
			wctx, cancel = context.WithTimeout(ctx, b.wait)
		}
		return wctx
	}
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	if ks != nil && !ks.sem.TryAcquire(n) {
		if err := ks.sem.Acquire(wait(), n); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("this caller's request bodies hold %d MiB, its share of the daemon's %d MiB; retry in a moment: %w", b.share>>20, b.size>>20, errdefs.ErrUnavailable)
		}
	}
	if !b.sem.TryAcquire(n) {
		if err := b.sem.Acquire(wait(), n); err != nil {
			if ks != nil {
				ks.sem.Release(n)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("the daemon is holding %d MiB of request bodies, its limit; retry in a moment: %w", b.size>>20, errdefs.ErrUnavailable)
		}
	}
	return nil
}

// release gives n bytes back to the budget and to ks's share.
func (b *Budget) release(ks *keyShare, n int64) {
	if n <= 0 {
		return
	}
	b.sem.Release(n)
	if ks != nil {
		ks.sem.Release(n)
	}
}

// Reader is a request body read under the budget. Close gives back what
// it took; it does not close the underlying body (the server does).
type Reader struct {
	b     *Budget
	ks    *keyShare // the caller's share, nil without one
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
	br := &Reader{b: b, ks: b.join(r.Context()), ctx: r.Context(), r: io.LimitReader(r.Body, limit+1), limit: limit}
	if r.ContentLength >= 0 {
		n := min(r.ContentLength, b.capacity(br.ks))
		if err := b.acquire(r.Context(), br.ks, n); err != nil {
			b.leave(br.ks)
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
		// the caller's share (or the whole budget) so one body can
		// always finish alone.
		capacity := br.b.capacity(br.ks)
		want := min(br.read+int64(len(p)), br.limit+1, capacity)
		for br.held < want {
			n := min(int64(step), capacity-br.held)
			if err := br.b.acquire(br.ctx, br.ks, n); err != nil {
				br.err = err
				return 0, err
			}
			br.held += n
		}
		if room := br.held - br.read; br.held < capacity && room < int64(len(p)) {
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

// Close gives the budget (and the caller's share) back.
func (br *Reader) Close() error {
	if br.held > 0 {
		br.b.release(br.ks, br.held)
		br.held = 0
	}
	if br.ks != nil {
		br.b.leave(br.ks)
		br.ks = nil
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
