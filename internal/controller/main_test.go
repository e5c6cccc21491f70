package controller

import (
	"os"
	"testing"

	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

// TestMain lets the test binary serve as the agent of processbackend's
// sandboxes (processbackend_test.go).
func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}
