package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

func TestExecEnd(t *testing.T) {
	zero := 0
	cases := []struct {
		name string
		ev   *api.ExecEvent
		code *int
		note string
		data map[string]string
	}{
		{"caller left", nil, nil, "no end", nil},
		{"failed", &api.ExecEvent{Type: api.EventEnd, Error: &api.Error{Message: "agent gone"}}, nil, "agent gone", nil},
		{"exited", &api.ExecEvent{Type: api.EventEnd, ExitCode: &zero}, &zero, "", nil},
		{"session restarted", &api.ExecEvent{Type: api.EventEnd, ExitCode: &zero, SessionRestarted: true}, &zero, "", map[string]string{"session_restarted": "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := execEnd(tc.ev)
			if (e.ExitCode == nil) != (tc.code == nil) || !strings.Contains(e.Note, tc.note) || e.Data["session_restarted"] != tc.data["session_restarted"] {
				t.Fatalf("execEnd = %+v", e)
			}
		})
	}
}

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
