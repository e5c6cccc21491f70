package ledger

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
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
			e := ExecEnd(tc.ev)
			if (e.ExitCode == nil) != (tc.code == nil) || !strings.Contains(e.Note, tc.note) || e.Data["session_restarted"] != tc.data["session_restarted"] {
				t.Fatalf("ExecEnd = %+v", e)
			}
		})
	}
}

func TestWatchExecKeepsTheEnd(t *testing.T) {
	var sent []string
	emit, end := WatchExec(func(ev api.ExecEvent) error {
		sent = append(sent, ev.Type)
		return nil
	})
	if end() != nil {
		t.Fatal("an end before any event")
	}
	code := 2
	for _, ev := range []api.ExecEvent{{Type: api.EventStart}, {Type: api.EventStdout, Data: []byte("x")}, {Type: api.EventEnd, ExitCode: &code}} {
		if err := emit(ev); err != nil {
			t.Fatal(err)
		}
	}
	if got := end(); got == nil || got.ExitCode == nil || *got.ExitCode != 2 || len(sent) != 3 {
		t.Fatalf("end %+v after %v", got, sent)
	}
}
