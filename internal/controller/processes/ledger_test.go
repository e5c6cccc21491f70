package processes

import (
	"strings"
	"testing"
	"time"

	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

func TestProcessEnd(t *testing.T) {
	start := time.Now().Add(-time.Minute)
	p := &agentv1.BackgroundProcess{
		Status: "exited", HasExitCode: true, ExitCode: 7,
		StartedAtUnixNano: 1_000_000_000, EndedAtUnixNano: 3_500_000_000,
	}
	e := processEnd(p, start)
	if e.ExitCode == nil || *e.ExitCode != 7 || e.Duration != 2500*time.Millisecond || e.Data["status"] != "exited" {
		t.Fatalf("processEnd = %+v", e)
	}
	// A sandbox clock that runs backwards: the daemon measures instead.
	p = &agentv1.BackgroundProcess{Status: "killed", Signal: "SIGTERM", StartedAtUnixNano: 5, EndedAtUnixNano: 4, Error: "x"}
	e = processEnd(p, start)
	if e.ExitCode != nil || e.Duration < time.Minute || e.Signal != "SIGTERM" || !strings.Contains(e.Note, "failed: x") {
		t.Fatalf("processEnd = %+v", e)
	}
}
