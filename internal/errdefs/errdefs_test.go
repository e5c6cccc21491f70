package errdefs

import (
	"context"
	"fmt"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// TestCodeRoundTrip: every class's sentinel, wrapped, has the class's
// code, and FromCode gives the sentinel back.
func TestCodeRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Classes() {
		if seen[c.Code] {
			t.Errorf("class %s listed twice", c.Code)
		}
		seen[c.Code] = true
		if c.Err == nil {
			continue
		}
		if got := Code(fmt.Errorf("wrapped: %w", c.Err)); got != c.Code {
			t.Errorf("Code(wrapped %v) = %s, want %s", c.Err, got, c.Code)
		}
		if got := FromCode(c.Code); got != c.Err {
			t.Errorf("FromCode(%s) = %v, want %v", c.Code, got, c.Err)
		}
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{context.Canceled, api.CodeCanceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), api.CodeDeadlineExceeded},
		{fmt.Errorf("plain"), api.CodeInternal},
		// The first class listed wins when an error wraps two.
		{fmt.Errorf("%w: %w", ErrNotFound, ErrUnavailable), api.CodeNotFound},
	} {
		if got := Code(tt.err); got != tt.want {
			t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if FromCode(api.CodeInternal) != nil || FromCode("no-such-code") != nil {
		t.Error("FromCode of internal or an unknown code is not nil")
	}
}
