package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestSandboxesRunTheSmallAgent checks that the binary `make build` makes
// gives sandboxes the embedded paddock-agent as PID 1, not a copy of the
// whole paddock binary.
func TestSandboxesRunTheSmallAgent(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	out := d.must("do", "--image", "busybox", "--", "sh", "-c", "stat -c %s /.paddock/bin/paddock; tr '\\0' ' ' </proc/1/cmdline")
	lines := strings.SplitN(strings.TrimSpace(out), "\n", 2)
	if len(lines) != 2 {
		t.Fatalf("unexpected output %q", out)
	}
	inside, err := strconv.ParseInt(lines[0], 10, 64)
	if err != nil {
		t.Fatalf("size %q: %v", lines[0], err)
	}
	fi, err := os.Stat(paddockBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if inside <= 0 || inside >= fi.Size()*3/4 {
		t.Fatalf("the sandbox's agent is %d bytes, the paddock binary %d: want the small embedded agent", inside, fi.Size())
	}
	if !strings.HasPrefix(lines[1], "/.paddock/bin/paddock agent") {
		t.Fatalf("PID 1 is %q, want the agent", lines[1])
	}
}
