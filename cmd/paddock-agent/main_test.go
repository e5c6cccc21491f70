package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/paddock-dev/paddock/internal/agent"
)

// TestRunExitCodes: help succeeds without starting the agent (the runtime
// probe depends on it), bad arguments fail, and a normal start serves on
// the socket given.
func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   int
		serves bool
	}{
		{[]string{"--help"}, 0, false},
		{[]string{"agent", "--help"}, 0, false},
		{[]string{"agent", "-h"}, 0, false},
		{[]string{"agent", "--no-such-flag"}, 2, false},
		{[]string{"agent", "extra"}, 2, false},
		{[]string{"agent", "--socket", "/run/x.sock"}, 0, true},
	} {
		served := ""
		serve := func(_ context.Context, o agent.RunOptions) error {
			served = o.Socket
			return nil
		}
		var stderr bytes.Buffer
		if got := run(t.Context(), tc.args, &stderr, serve); got != tc.want {
			t.Errorf("run(%q) = %d, want %d (stderr %q)", tc.args, got, tc.want, stderr.String())
		}
		if tc.serves != (served != "") {
			t.Errorf("run(%q) served on %q", tc.args, served)
		}
	}
}
