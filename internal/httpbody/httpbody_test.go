package httpbody

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// countingBody counts what is read from it.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingBody) Close() error { return nil }

func request(body string, declared bool) (*http.Request, *countingBody) {
	cb := &countingBody{r: strings.NewReader(body)}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body = cb
	r.ContentLength = -1
	if declared {
		r.ContentLength = int64(len(body))
	}
	return r, cb
}

func TestDeclaredTooLargeIsNotRead(t *testing.T) {
	b := NewBudget(32 << 20)
	r, cb := request(strings.Repeat("x", 2048), true)
	var v map[string]any
	err := b.DecodeJSON(r, 1024, &v, DecodeOptions{})
	if !errors.Is(err, errdefs.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "2048 bytes") || !strings.Contains(err.Error(), "at most 1024") {
		t.Fatalf("err = %v, want payload too large with both sizes", err)
	}
	if n := cb.read.Load(); n != 0 {
		t.Errorf("read %d bytes of a body refused by its length", n)
	}
}

func TestUndeclaredTooLarge(t *testing.T) {
	b := NewBudget(32 << 20)
	r, cb := request(`{"a":"`+strings.Repeat("x", 1<<20)+`"}`, false)
	var v map[string]any
	if err := b.DecodeJSON(r, 4096, &v, DecodeOptions{}); !errors.Is(err, errdefs.ErrPayloadTooLarge) {
		t.Fatalf("err = %v, want payload too large", err)
	}
	if n := cb.read.Load(); n > 4096+1 {
		t.Errorf("read %d bytes of a body limited to 4096", n)
	}
	if held := b.size - available(b); held != 0 {
		t.Errorf("%d bytes of budget still held after the refusal", held)
	}
}

// available is what the budget has free.
func available(b *Budget) int64 {
	var n int64
	for step := b.size; step > 0; step /= 2 {
		for b.sem.TryAcquire(step) {
			n += step
		}
	}
	b.sem.Release(n)
	return n
}

func TestDecodeJSON(t *testing.T) {
	b := NewBudget(32 << 20)
	for _, tc := range []struct {
		name, body string
		o          DecodeOptions
		want       error
	}{
		{"ok", `{"a":1}`, DecodeOptions{}, nil},
		{"unknown field", `{"b":1}`, DecodeOptions{}, errdefs.ErrInvalidArgument},
		{"unknown allowed", `{"b":1}`, DecodeOptions{AllowUnknown: true}, nil},
		{"empty", ``, DecodeOptions{}, errdefs.ErrInvalidArgument},
		{"empty allowed", ``, DecodeOptions{AllowEmpty: true}, nil},
		{"trailing", `{"a":1} {"a":2}`, DecodeOptions{}, errdefs.ErrInvalidArgument},
		{"broken", `{"a":`, DecodeOptions{}, errdefs.ErrInvalidArgument},
	} {
		for _, declared := range []bool{true, false} {
			r, _ := request(tc.body, declared)
			var v struct{ A int }
			err := b.DecodeJSON(r, 1024, &v, tc.o)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("%s (declared %v): err = %v, want %v", tc.name, declared, err, tc.want)
			}
		}
	}
	if a := available(b); a != b.size {
		t.Errorf("budget not whole after decoding: %d of %d free", a, b.size)
	}
}

// TestBudgetBoundsAllRequests: bodies that together pass the budget wait
// for it, and past the wait are refused as unavailable; nothing is read
// beyond the budget meanwhile.
func TestBudgetBoundsAllRequests(t *testing.T) {
	b := NewBudget(1 << 20)
	b.wait = 200 * time.Millisecond
	r1, _ := request(strings.Repeat("x", 800<<10), true)
	held, err := b.Open(r1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// A declared body that does not fit waits, then is refused unread.
	r2, cb2 := request(strings.Repeat("x", 400<<10), true)
	if _, err := b.Open(r2, 1<<20); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("second body: %v, want unavailable", err)
	}
	if cb2.read.Load() != 0 {
		t.Error("a body refused for want of budget was read")
	}
	// An undeclared one reads what fits, then is refused.
	r3, cb3 := request(strings.Repeat("x", 600<<10), false)
	_, _, err = b.ReadAll(r3, 1<<20)
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("undeclared body: %v, want unavailable", err)
	}
	if n := cb3.read.Load(); n > 256<<10 {
		t.Errorf("undeclared body read %d bytes with %d of budget free", n, 224<<10)
	}
	// Once the first is done, the second fits.
	held.Close()
	r4, _ := request(strings.Repeat("x", 400<<10), true)
	data, release, err := b.ReadAll(r4, 1<<20)
	if err != nil || len(data) != 400<<10 {
		t.Fatalf("after release: %d bytes, %v", len(data), err)
	}
	release()
	if a := available(b); a != b.size {
		t.Errorf("budget not whole at the end: %d of %d free", a, b.size)
	}
}

// TestBodyLargerThanBudget: a route whose limit is above the whole
// budget still takes a body of that size when it is alone.
func TestBodyLargerThanBudget(t *testing.T) {
	b := NewBudget(1 << 20)
	for _, declared := range []bool{true, false} {
		r, _ := request(strings.Repeat("x", 3<<20), declared)
		data, release, err := b.ReadAll(r, 4<<20)
		if err != nil || len(data) != 3<<20 {
			t.Fatalf("declared %v: %d bytes, %v", declared, len(data), err)
		}
		release()
	}
}

func TestCanceledWhileWaiting(t *testing.T) {
	b := NewBudget(1 << 20)
	r1, _ := request(strings.Repeat("x", 1<<20), true)
	held, err := b.Open(r1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r2, _ := request("{}", true)
	r2 = r2.WithContext(ctx)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := b.Open(r2, 1<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}

type callerKey struct{}

// asCaller is a request whose context names a caller for keyOf below.
func asCaller(r *http.Request, who string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, who))
}

func keyOf(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// TestSharesBoundOneCaller: one caller's bodies hold at most its share
// together, so another caller still finds budget; a caller not bounded by
// a share ("") has the rest; a body bigger than the share still finishes
// alone; shares are forgotten once their bodies are closed.
func TestSharesBoundOneCaller(t *testing.T) {
	b := NewBudget(2 << 20)
	b.SetShares(keyOf, 0)
	b.wait = 200 * time.Millisecond
	if b.Share() != 1<<20 {
		t.Fatalf("share = %d, want half the budget", b.Share())
	}
	ra, _ := request(strings.Repeat("a", 1<<20), true)
	heldA, err := b.Open(asCaller(ra, "key-a"), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The same caller's next body waits for its share, then is refused
	// unread, with the budget half free.
	ra2, cba2 := request(strings.Repeat("a", 64<<10), true)
	if _, err := b.Open(asCaller(ra2, "key-a"), 4<<20); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "its share") {
		t.Fatalf("second body of key-a: %v, want unavailable for its share", err)
	}
	if cba2.read.Load() != 0 {
		t.Error("a body refused for want of share was read")
	}
	// An undeclared body of the same caller is refused too.
	ra3, _ := request(strings.Repeat("a", 64<<10), false)
	if _, _, err := b.ReadAll(asCaller(ra3, "key-a"), 4<<20); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("undeclared body of key-a: %v, want unavailable", err)
	}
	// Another caller gets its own share.
	rb, _ := request(strings.Repeat("b", 1<<20), true)
	data, releaseB, err := b.ReadAll(asCaller(rb, "key-b"), 4<<20)
	if err != nil || len(data) != 1<<20 {
		t.Fatalf("key-b beside key-a: %d bytes, %v", len(data), err)
	}
	// The budget is now whole taken: the operator ("") waits like anyone.
	ro, _ := request("{}", true)
	if _, err := b.Open(ro, 4<<20); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "its limit") {
		t.Fatalf("operator with the budget taken: %v, want unavailable", err)
	}
	releaseB()
	heldA.Close()
	// A body bigger than the share finishes alone, holding the share.
	for _, declared := range []bool{true, false} {
		r, _ := request(strings.Repeat("x", 3<<20), declared)
		data, release, err := b.ReadAll(asCaller(r, "key-a"), 4<<20)
		if err != nil || len(data) != 3<<20 {
			t.Fatalf("declared %v: %d bytes, %v", declared, len(data), err)
		}
		release()
	}
	if a := available(b); a != b.size {
		t.Errorf("budget not whole at the end: %d of %d free", a, b.size)
	}
	b.mu.Lock()
	left := len(b.keys)
	b.mu.Unlock()
	if left != 0 {
		t.Errorf("%d shares kept after every body closed", left)
	}
}
