package e2e

import (
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// TestAgentOOMScore: the agent (PID 1) is the OOM killer's last choice in
// its sandbox, and what it starts is back at the ordinary score, so a
// sandbox out of memory loses a user process and not its agent.
func TestAgentOOMScore(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	out, code := execOut(t, d, sb.ID, "sh", "-c", "cat /proc/1/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	// Where the daemon may lower scores (CAP_SYS_RESOURCE) the agent runs
	// at -998 and children at 0; elsewhere children are put above it.
	got := strings.Fields(out)
	if len(got) != 2 {
		t.Fatalf("output %q", out)
	}
	agentScore, err1 := strconv.Atoi(got[0])
	childScore, err2 := strconv.Atoi(got[1])
	if err1 != nil || err2 != nil || childScore <= agentScore || childScore < 0 {
		t.Fatalf("oom_score_adj of agent %s and of a grandchild %s: the child must be picked first", got[0], got[1])
	}
	t.Logf("oom_score_adj: agent %d, user process %d", agentScore, childScore)
}
