package errconnect

import (
	"errors"
	"fmt"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// TestEveryClassMapped: a class added to errdefs without a Connect code
// fails here; and each class's code maps back to the same class, except
// payload_too_large, which Connect calls resource_exhausted.
func TestEveryClassMapped(t *testing.T) {
	for _, c := range errdefs.Classes() {
		code, ok := codes[c.Code]
		if !ok {
			t.Errorf("class %s has no Connect code", c.Code)
			continue
		}
		back := errdefs.Code(Sentinel(code))
		if back == "" {
			back = api.CodeInternal
		}
		want := c.Code
		if c.Code == api.CodePayloadTooLarge {
			want = api.CodeResourceExhausted
		}
		if back != want {
			t.Errorf("class %s -> %s -> %s, want %s", c.Code, code, back, want)
		}
		if c.Err != nil {
			if got := Code(fmt.Errorf("x: %w", c.Err)); got != code {
				t.Errorf("Code(%v) = %s, want %s", c.Err, got, code)
			}
		}
	}
	if got := Code(errors.New("plain")); got.String() != "internal" {
		t.Errorf("Code(plain) = %s, want internal", got)
	}
}
