package cli

import (
	"strings"
	"testing"
)

// TestIdempotencyKeyFlag: the global flag is checked before any call, and
// refused by the commands that serve many calls.
func TestIdempotencyKeyFlag(t *testing.T) {
	s := newFake(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ls", "--idempotency-key", "ok-key"}, 0, ""},
		{[]string{"--idempotency-key", "ok-key", "ls"}, 0, ""},
		{[]string{"ls", "--idempotency-key", ""}, 1, "1 to 238"},
		{[]string{"ls", "--idempotency-key", strings.Repeat("k", 239)}, 1, "1 to 238"},
		{[]string{"ls", "--idempotency-key", "tab\there"}, 1, "visible ASCII"},
		{[]string{"mcp", "--idempotency-key", "k"}, 1, "serves many"},
		{[]string{"serve", "--idempotency-key", "k"}, 1, "serves many"},
	} {
		r := runCLI(t, s, "", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("paddock %.50v: exit %d, stderr %q; want exit %d saying %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}
