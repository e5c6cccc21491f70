package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// waitEntries waits until a sandbox's ledger has n entries of kind (an
// exec's entry is written just after its end event is sent) and returns
// them.
func waitEntries(t *testing.T, d *daemon, id, kind string, n int) []api.LedgerEntry {
	t.Helper()
	var es []api.LedgerEntry
	waitFor(t, fmt.Sprintf("%d %s entries", n, kind), func() bool {
		es = ledgerEntries(t, d, id, kind)
		return len(es) >= n
	})
	return es
}

// ledgerEntries returns a sandbox's entries of one kind.
func ledgerEntries(t *testing.T, d *daemon, id, kind string) []api.LedgerEntry {
	t.Helper()
	l, err := d.client.Ledger(ctxT(t, time.Minute), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []api.LedgerEntry
	for _, e := range l.Entries {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestLedgerCommands: every way of running a command leaves its trace in
// the ledger (a session command, a background process's start and end, a
// code run, a terminal's open and end), with env names and never env
// values.
func TestLedgerCommands(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	sb := create(t, d, api.CreateSandboxRequest{}) // the base image: code contexts need python
	secrets := []string{"exec-secret-1", "session-secret-2", "proc-secret-3", "ctx-secret-4", "term-secret-5"}

	t.Run("exec", func(t *testing.T) {
		res, err := d.client.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"sh", "-c", "exit 2"}, Env: map[string]string{"API_TOKEN": secrets[0]}})
		if err != nil || res.ExitCode != 2 {
			t.Fatalf("exec: %v %+v", err, res)
		}
		es := waitEntries(t, d, sb.ID, api.LedgerExec, 1)
		if len(es) != 1 || es[0].Data["env"] != "API_TOKEN" || es[0].ExitCode == nil || *es[0].ExitCode != 2 {
			t.Fatalf("exec entries = %+v", es)
		}
	})

	t.Run("session command", func(t *testing.T) {
		if _, err := d.client.CreateSession(ctx, sb.ID, api.CreateSessionRequest{Name: "s1", Env: map[string]string{"S": secrets[1]}}); err != nil {
			t.Fatal(err)
		}
		res, err := d.client.Exec(ctx, sb.ID, paddock.ExecOptions{Session: "s1", Cmd: []string{"sleep 0.2; (exit 4)"}})
		if err != nil || res.ExitCode != 4 {
			t.Fatalf("session exec: %v %+v", err, res)
		}
		es := waitEntries(t, d, sb.ID, api.LedgerExec, 2)
		e := es[len(es)-1]
		if e.Data["session"] != "s1" || !slices.Equal(e.Command, []string{"sleep 0.2; (exit 4)"}) || e.ExitCode == nil || *e.ExitCode != 4 || e.DurationMS < 200 {
			t.Fatalf("session exec entry = %+v", e)
		}
	})

	t.Run("background process", func(t *testing.T) {
		p, err := d.client.StartProcess(ctx, sb.ID, api.StartProcessRequest{
			ID: "p1", Cmd: []string{"sh", "-c", "sleep 0.5; exit 5"}, Env: map[string]string{"PROC_KEY": secrets[2]}, Cwd: "/tmp",
		})
		if err != nil {
			t.Fatal(err)
		}
		starts := ledgerEntries(t, d, sb.ID, api.LedgerProcessStart)
		if len(starts) != 1 || starts[0].Data["process"] != "p1" || starts[0].Data["env"] != "PROC_KEY" ||
			starts[0].Data["cwd"] != "/tmp" || starts[0].Data["pid"] == "" || starts[0].Command[2] != "sleep 0.5; exit 5" {
			t.Fatalf("process_start entries = %+v (process %+v)", starts, p)
		}
		// Nobody waits for it: the daemon learns the end by itself.
		ends := waitEntries(t, d, sb.ID, api.LedgerProcessEnd, 1)
		e := ends[0]
		if len(ends) != 1 || e.Data["process"] != "p1" || e.ExitCode == nil || *e.ExitCode != 5 || e.DurationMS < 500 || e.Data["status"] == "" {
			t.Fatalf("process_end entries = %+v", ends)
		}
		// A killed one ends with its signal.
		if _, err := d.client.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "p2", Cmd: []string{"sleep", "600"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.KillProcess(ctx, sb.ID, "p2", api.KillProcessRequest{Signal: "SIGKILL"}); err != nil {
			t.Fatal(err)
		}
		if e := waitEntries(t, d, sb.ID, api.LedgerProcessEnd, 2)[1]; e.Data["process"] != "p2" || e.Data["signal"] != "SIGKILL" {
			t.Fatalf("killed process's end = %+v", e)
		}
	})

	t.Run("code run", func(t *testing.T) {
		if _, err := d.client.CreateContext(ctx, sb.ID, api.CreateContextRequest{ID: "c1", Language: "python", Env: map[string]string{"CTX_KEY": secrets[3]}}); err != nil {
			t.Fatal(err)
		}
		code := "x = 1\n" + strings.Repeat("# padding\n", 100)
		if _, err := d.client.RunCode(ctx, sb.ID, "c1", code, paddock.RunCodeOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.RunCode(ctx, sb.ID, "c1", "raise ValueError('no')", paddock.RunCodeOptions{}); err != nil {
			t.Fatal(err)
		}
		runs := waitEntries(t, d, sb.ID, api.LedgerCodeRun, 2)
		if len(runs) != 2 {
			t.Fatalf("code_run entries = %+v", runs)
		}
		ok, bad := runs[0], runs[1]
		if ok.Data["language"] != "python" || ok.Data["context"] != "c1" || ok.Data["code_bytes"] != "1006" ||
			!strings.HasPrefix(ok.Data["code"], "x = 1\n# padding") || len(ok.Data["code"]) > 256 || ok.Data["code_truncated"] != "true" ||
			ok.Data["status"] != api.RunOK {
			t.Fatalf("code_run entry = %+v", ok)
		}
		if bad.Data["status"] != api.RunError || bad.Data["error"] != "ValueError" || bad.Data["code"] != "raise ValueError('no')" {
			t.Fatalf("code_run entry of an exception = %+v", bad)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		term, err := d.client.OpenTerminal(ctx, sb.ID, paddock.TerminalOptions{Cmd: []string{"sh", "-c", "sleep 0.2; exit 6"}, Env: map[string]string{"TERM_KEY": secrets[4]}})
		if err != nil {
			t.Fatal(err)
		}
		defer term.Close()
		exit, err := term.Wait(ctx)
		if err != nil || exit.ExitCode != 6 {
			t.Fatalf("terminal: %v %+v", err, exit)
		}
		opens := ledgerEntries(t, d, sb.ID, api.LedgerTerminalOpen)
		if len(opens) != 1 || opens[0].Data["terminal"] != term.ID() || opens[0].Data["env"] != "TERM_KEY" || opens[0].Command[0] != "sh" {
			t.Fatalf("terminal_open entries = %+v", opens)
		}
		if e := waitEntries(t, d, sb.ID, api.LedgerTerminalEnd, 1)[0]; e.Data["terminal"] != term.ID() || e.ExitCode == nil || *e.ExitCode != 6 || e.DurationMS < 200 {
			t.Fatalf("terminal_end entry = %+v", e)
		}
	})

	t.Run("a stop ends a process", func(t *testing.T) {
		if _, err := d.client.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "p3", Cmd: []string{"sleep", "600"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.Stop(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		ends := waitEntries(t, d, sb.ID, api.LedgerProcessEnd, 3)
		t.Logf("p3 ended: %+v", ends[2])
		if e := ends[2]; e.Data["process"] != "p3" || (e.Data["signal"] == "" && !strings.Contains(e.Note, "end unknown")) {
			t.Fatalf("end of a process its sandbox's stop ended = %+v", e)
		}
	})

	l, err := d.client.Ledger(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(l)
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			t.Errorf("the ledger holds the env value %q:\n%s", s, b)
		}
	}
	// Callers may not forge these kinds.
	for _, k := range []string{api.LedgerProcessStart, api.LedgerProcessEnd, api.LedgerCodeRun, api.LedgerTerminalOpen, api.LedgerTerminalEnd} {
		if _, err := d.client.AddLedgerEntry(ctx, sb.ID, api.AddLedgerEntryRequest{Kind: k}); err == nil {
			t.Errorf("a caller added a %s entry", k)
		}
	}
}
