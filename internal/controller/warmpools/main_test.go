package warmpools_test

import (
	"os"
	"testing"

	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

// TestMain lets the test binary serve as the agent of processbackend's
// sandboxes (controllertest).
func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}
