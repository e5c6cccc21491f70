package paddock

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestRetryWhileStarting: a 503 with a Retry-After (a daemon starting) is
// waited out; one without is returned at once.
func TestRetryWhileStarting(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"unavailable","message":"the daemon is starting","status":"starting"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("health after two starting answers: %v", err)
	}
	if n := calls.Load(); n != 3 || time.Since(start) < 2*time.Second {
		t.Errorf("%d calls in %s, want 3 about a second apart", n, time.Since(start))
	}

	noRetry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"unavailable","message":"down"}`))
	}))
	defer noRetry.Close()
	start = time.Now()
	if _, err := (&Client{URL: noRetry.URL}).Health(ctx); !errors.Is(err, ErrUnavailable) || time.Since(start) > time.Second {
		t.Errorf("503 without Retry-After: %v after %s, want unavailable at once", err, time.Since(start))
	}
}
