package agent

import (
	"testing"

	"github.com/paddock-dev/paddock/internal/agent/client"
)

// The client cannot import the agent; both take the names they use for
// daemon terminals from internal/agent/wire, and they must agree.
func TestTerminalNamesMatchClient(t *testing.T) {
	if TerminalTagPrefix != client.TerminalTagPrefix {
		t.Errorf("tag prefix: agent %q, client %q", TerminalTagPrefix, client.TerminalTagPrefix)
	}
	if maxEndedTerms <= 0 || termKeepBytes <= 0 {
		t.Errorf("bounds must be positive")
	}
}
