package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/ledger"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

func TestCmdLedgerEntry(t *testing.T) {
	three, minus := 3, -1
	long := strings.Repeat("a", ledger.MaxCommand)
	cases := []struct {
		name  string
		l     cmdLedger
		end   *cmdEnd
		check func(t *testing.T, e api.LedgerEntry)
	}{
		{
			name: "start keeps argv, user, cwd and env names, never env values",
			l: cmdLedger{kind: api.LedgerProcessStart, cmd: []string{"server", "--port", "80"}, user: "root", cwd: "/srv",
				env: map[string]string{"TOKEN": "s3cr3t-value", "A": "other-secret"}, data: map[string]string{"process": "web"}},
			check: func(t *testing.T, e api.LedgerEntry) {
				if e.Kind != api.LedgerProcessStart || strings.Join(e.Command, " ") != "server --port 80" {
					t.Errorf("entry = %+v", e)
				}
				if e.Data["env"] != "A,TOKEN" || e.Data["user"] != "root" || e.Data["cwd"] != "/srv" || e.Data["process"] != "web" {
					t.Errorf("data = %v", e.Data)
				}
				if e.ExitCode != nil || e.DurationMS != 0 {
					t.Errorf("a start entry has an end: %+v", e)
				}
			},
		},
		{
			name: "end with exit code, signal, time out and duration",
			l:    cmdLedger{kind: api.LedgerExec, cmd: []string{"sleep", "9"}},
			end:  &cmdEnd{exitCode: &minus, signal: "SIGKILL", timedOut: true, duration: 1500 * time.Millisecond},
			check: func(t *testing.T, e api.LedgerEntry) {
				if e.ExitCode == nil || *e.ExitCode != -1 || e.DurationMS != 1500 || e.Data["signal"] != "SIGKILL" || e.Data["timed_out"] != "true" {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "an unknown end has a note and no exit code",
			l:    cmdLedger{kind: api.LedgerTerminalEnd, cmd: []string{"bash"}},
			end:  &cmdEnd{note: "end unknown: broke"},
			check: func(t *testing.T, e api.LedgerEntry) {
				if e.ExitCode != nil || e.Note != "end unknown: broke" {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "a huge command line is cut to the bound and its size kept",
			l:    cmdLedger{kind: api.LedgerExec, cmd: []string{"echo", long, "more"}},
			end:  &cmdEnd{exitCode: &three},
			check: func(t *testing.T, e api.LedgerEntry) {
				n := 0
				for _, a := range e.Command {
					n += len(a)
				}
				if len(e.Command) != 2 || n > ledger.MaxCommand+len("…") || e.Data["command_bytes"] != "65544" {
					t.Errorf("%d args, %d bytes, data %v", len(e.Command), n, e.Data)
				}
			},
		},
		{
			name: "text from a sandbox is made storable",
			l:    cmdLedger{kind: api.LedgerProcessEnd, cmd: []string{"a\x00b", "\xff"}},
			end:  &cmdEnd{signal: "SIG\x00", note: "bad \xfe note", data: map[string]string{"status": strings.Repeat("é", 2000)}},
			check: func(t *testing.T, e api.LedgerEntry) {
				for _, s := range append(e.Command, e.Note, e.Data["signal"], e.Data["status"]) {
					if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
						t.Errorf("unstorable text %q", s)
					}
				}
				if len(e.Data["status"]) > maxLedgerText {
					t.Errorf("status is %d bytes", len(e.Data["status"]))
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.l.data == nil {
				tc.l.data = map[string]string{}
			}
			tc.l.start = time.Now()
			e := tc.l.entry(tc.end)
			tc.check(t, e)
			b, _ := json.Marshal(e)
			for _, v := range tc.l.env {
				if strings.Contains(string(b), v) {
					t.Errorf("an env value is in the entry: %s", b)
				}
			}
		})
	}
}

func TestEnvNamesBounded(t *testing.T) {
	env := map[string]string{}
	for i := range 2000 {
		env[fmt.Sprintf("SOME_VARIABLE_%04d", i)] = "v"
	}
	got := envNames(env)
	if len(got) > maxLedgerEnvNames+32 || !strings.Contains(got, "more") {
		t.Fatalf("envNames is %d bytes: ...%s", len(got), got[max(0, len(got)-40):])
	}
}

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
			if (e.exitCode == nil) != (tc.code == nil) || !strings.Contains(e.note, tc.note) || e.data["session_restarted"] != tc.data["session_restarted"] {
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
	if e.exitCode == nil || *e.exitCode != 7 || e.duration != 2500*time.Millisecond || e.data["status"] != "exited" {
		t.Fatalf("processEnd = %+v", e)
	}
	// A sandbox clock that runs backwards: the daemon measures instead.
	p = &agentv1.BackgroundProcess{Status: "killed", Signal: "SIGTERM", StartedAtUnixNano: 5, EndedAtUnixNano: 4, Error: "x"}
	e = processEnd(p, start)
	if e.exitCode != nil || e.duration < time.Minute || e.signal != "SIGTERM" || !strings.Contains(e.note, "failed: x") {
		t.Fatalf("processEnd = %+v", e)
	}
}

func TestCommandKindsReserved(t *testing.T) {
	for _, k := range []string{api.LedgerProcessStart, api.LedgerProcessEnd, api.LedgerCodeRun, api.LedgerTerminalOpen, api.LedgerTerminalEnd} {
		if err := validateLedgerAdd(api.AddLedgerEntryRequest{Kind: k}); err == nil {
			t.Errorf("a caller may add kind %q", k)
		}
	}
}
