package agent

import (
	"testing"

	"github.com/paddock-dev/paddock/internal/agent/client"
)

// The client cannot import the agent, so it repeats the names both sides
// use for daemon terminals; they must agree.
func TestTerminalNamesMatchClient(t *testing.T) {
	if TerminalTagPrefix != client.TerminalTagPrefix {
		t.Errorf("tag prefix: agent %q, client %q", TerminalTagPrefix, client.TerminalTagPrefix)
	}
	if maxEndedTerms <= 0 || termKeepBytes <= 0 {
		t.Errorf("bounds must be positive")
	}
}
