package ledger

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/api"
)

func TestCommandEntry(t *testing.T) {
	three, minus := 3, -1
	long := strings.Repeat("a", MaxCommand)
	cases := []struct {
		name  string
		l     Command
		end   *End
		check func(t *testing.T, e api.LedgerEntry)
	}{
		{
			name: "start keeps argv, user, cwd and env names, never env values",
			l: Command{Kind: api.LedgerProcessStart, Cmd: []string{"server", "--port", "80"}, User: "root", Cwd: "/srv",
				Env: map[string]string{"TOKEN": "s3cr3t-value", "A": "other-secret"}, Data: map[string]string{"process": "web"}},
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
			l:    Command{Kind: api.LedgerExec, Cmd: []string{"sleep", "9"}},
			end:  &End{ExitCode: &minus, Signal: "SIGKILL", TimedOut: true, Duration: 1500 * time.Millisecond},
			check: func(t *testing.T, e api.LedgerEntry) {
				if e.ExitCode == nil || *e.ExitCode != -1 || e.DurationMS != 1500 || e.Data["signal"] != "SIGKILL" || e.Data["timed_out"] != "true" {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "an unknown end has a note and no exit code",
			l:    Command{Kind: api.LedgerTerminalEnd, Cmd: []string{"bash"}},
			end:  &End{Note: "end unknown: broke"},
			check: func(t *testing.T, e api.LedgerEntry) {
				if e.ExitCode != nil || e.Note != "end unknown: broke" {
					t.Errorf("entry = %+v", e)
				}
			},
		},
		{
			name: "a huge command line is cut to the bound and its size kept",
			l:    Command{Kind: api.LedgerExec, Cmd: []string{"echo", long, "more"}},
			end:  &End{ExitCode: &three},
			check: func(t *testing.T, e api.LedgerEntry) {
				n := 0
				for _, a := range e.Command {
					n += len(a)
				}
				if len(e.Command) != 2 || n > MaxCommand+len("…") || e.Data["command_bytes"] != "65544" {
					t.Errorf("%d args, %d bytes, data %v", len(e.Command), n, e.Data)
				}
			},
		},
		{
			name: "text from a sandbox is made storable",
			l:    Command{Kind: api.LedgerProcessEnd, Cmd: []string{"a\x00b", "\xff"}},
			end:  &End{Signal: "SIG\x00", Note: "bad \xfe note", Data: map[string]string{"status": strings.Repeat("é", 2000)}},
			check: func(t *testing.T, e api.LedgerEntry) {
				for _, s := range append(e.Command, e.Note, e.Data["signal"], e.Data["status"]) {
					if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
						t.Errorf("unstorable text %q", s)
					}
				}
				if len(e.Data["status"]) > maxText {
					t.Errorf("status is %d bytes", len(e.Data["status"]))
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.l.Data == nil {
				tc.l.Data = map[string]string{}
			}
			tc.l.Start = time.Now()
			e := tc.l.Entry(tc.end)
			tc.check(t, e)
			b, _ := json.Marshal(e)
			for _, v := range tc.l.Env {
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
	if len(got) > maxEnvNames+32 || !strings.Contains(got, "more") {
		t.Fatalf("envNames is %d bytes: ...%s", len(got), got[max(0, len(got)-40):])
	}
}
