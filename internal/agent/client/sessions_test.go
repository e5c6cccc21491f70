package client_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// sessionRun runs command in session and returns stdout, stderr and end.
func sessionRun(t *testing.T, c *client.Client, session, command string, timeout time.Duration) (string, string, *agentv1.SessionExecEvent_End) {
	t.Helper()
	var out, errOut strings.Builder
	end, err := c.ExecInSession(ctxT(t), &agentv1.SessionExecRequest{Session: session, Command: command, TimeoutMs: timeout.Milliseconds()},
		func(ev *agentv1.SessionExecEvent) error {
			out.Write(ev.GetStdout())
			errOut.Write(ev.GetStderr())
			return nil
		})
	if err != nil {
		t.Fatalf("session exec %q: %v", command, err)
	}
	return out.String(), errOut.String(), end
}

func TestSessionKeepsShellState(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.c.CreateSession(ctx, &agentv1.CreateSessionRequest{Name: "s1", Env: map[string]string{"A": "1"}}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		cmd, stdout, stderr string
		code                int32
	}{
		{"cd /tmp", "", "", 0},
		{"pwd", "/tmp\n", "", 0},
		{"export B=2", "", "", 0},
		{"echo $A$B", "12\n", "", 0},
		{"f() { echo \"f:$1\"; }", "", "", 0},
		{"f x; echo err >&2; exit_code_is() { return 3; }; exit_code_is", "f:x\n", "err\n", 3},
		{"printf 'no newline'", "no newline", "", 0},
		{"echo '__PADDOCK_' quoted 'it''s'", "__PADDOCK_ quoted its\n", "", 0},
		{"read x; echo \"[$x]\"", "[]\n", "", 0},
		{"if then", "", "", 2},
	}
	for _, s := range steps {
		out, errOut, end := sessionRun(t, e.c, "s1", s.cmd, 10*time.Second)
		if out != s.stdout || (s.stderr != "" && errOut != s.stderr) || end.GetExitCode() != s.code {
			t.Errorf("%q: stdout %q stderr %q code %d; want %q %q %d", s.cmd, out, errOut, end.GetExitCode(), s.stdout, s.stderr, s.code)
		}
	}
	// exit ends the shell: the end says so and the next command still works.
	_, _, end := sessionRun(t, e.c, "s1", "exit 7", 10*time.Second)
	if end.GetExitCode() != 7 || !end.GetShellRestarted() {
		t.Errorf("exit 7: end %+v", end)
	}
	if out, _, _ := sessionRun(t, e.c, "s1", "echo $A", 10*time.Second); out != "1\n" {
		t.Errorf("after restart: %q, want the session env back", out)
	}
}

func TestSessionTimeoutKeepsSessionUsable(t *testing.T) {
	e := newEnv(t)
	sessionRun(t, e.c, "", "cd / && X=kept", 10*time.Second)
	cases := []struct {
		name, cmd string
		restarted bool
	}{
		{"external command", "sleep 1000", false},
		{"pipeline in a subshell", "(sleep 1000 | cat) ; echo never", false},
		{"builtin loop", "while :; do :; done", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, end := sessionRun(t, e.c, "", c.cmd, 300*time.Millisecond)
			if !end.GetTimedOut() || end.GetExitCode() != -1 || end.GetShellRestarted() != c.restarted {
				t.Fatalf("end %+v", end)
			}
			out, _, end := sessionRun(t, e.c, "", "echo alive $X", 10*time.Second)
			want := "alive kept\n"
			if c.restarted {
				want = "alive\n"
				sessionRun(t, e.c, "", "cd / && X=kept", 10*time.Second)
			}
			if out != want || end.GetExitCode() != 0 {
				t.Fatalf("after timeout: %q %+v, want %q", out, end, want)
			}
		})
	}
}

func TestSessionQueue(t *testing.T) {
	e := newEnv(t)
	if _, err := e.c.CreateSession(ctxT(t), &agentv1.CreateSessionRequest{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	sessionRun(t, e.c, "q", "n=0", 10*time.Second)
	const n = 100
	// A hundred commands wait their turn one after another: on a loaded
	// host that is longer than one call's usual 10 s.
	qctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out strings.Builder
			_, errs[i] = e.c.ExecInSession(qctx, &agentv1.SessionExecRequest{Session: "q", Command: "n=$((n+1)); echo $n"},
				func(ev *agentv1.SessionExecEvent) error { out.Write(ev.GetStdout()); return nil })
			results[i] = strings.TrimSpace(out.String())
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("command %d: %v", i, errs[i])
		}
		seen[results[i]] = true
	}
	// One at a time: every command saw a different counter.
	for i := 1; i <= n; i++ {
		if !seen[strconv.Itoa(i)] {
			t.Fatalf("no command printed %d: %v", i, results)
		}
	}
	// A queue deadline fails a command that waits too long.
	busy := make(chan error, 1)
	go func() {
		_, err := e.c.ExecInSession(context.Background(), &agentv1.SessionExecRequest{Session: "q", Command: "sleep 2"},
			func(*agentv1.SessionExecEvent) error { return nil })
		busy <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if l, _ := e.c.ListSessions(ctxT(t)); len(l) > 0 && l[0].GetBusy() {
			break
		}
	}
	_, err := e.c.ExecInSession(ctxT(t), &agentv1.SessionExecRequest{Session: "q", Command: "true", QueueTimeoutMs: 100},
		func(*agentv1.SessionExecEvent) error { return nil })
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Fatalf("queued past its deadline: %v", err)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
}

func TestSessionDeleteSparesBackgroundProcesses(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	bg, err := e.c.StartBackground(ctx, &agentv1.StartProcessRequest{Id: "keeper", Cmd: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateSession(ctx, &agentv1.CreateSessionRequest{Name: "doomed"}); err != nil {
		t.Fatal(err)
	}
	out, _, _ := sessionRun(t, e.c, "doomed", "sleep 1000 >/dev/null 2>&1 & echo $!", 10*time.Second)
	child, _ := strconv.Atoi(strings.TrimSpace(out))
	if err := e.c.DeleteSession(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.DeleteSession(ctx, "doomed"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(child, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(child, 0) == nil {
		t.Errorf("the session's own job %d survived its deletion", child)
	}
	got, err := e.c.GetBackground(ctx, "keeper")
	if err != nil || got.GetStatus() != "running" || syscall.Kill(int(bg.GetPid()), 0) != nil {
		t.Fatalf("background process after session delete: %+v %v", got, err)
	}
	if _, err := e.c.KillBackground(ctx, &agentv1.KillProcessRequest{Id: "keeper", Signal: "TERM", GraceMs: 2000}); err != nil {
		t.Fatal(err)
	}
}

func TestBackgroundLogsAndWaits(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	p, err := e.c.StartBackground(ctx, &agentv1.StartProcessRequest{Id: "talker", LogBufferBytes: 4096,
		Cmd: []string{"sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; echo ready >&2; exec sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.c.WaitBackground(ctx, &agentv1.WaitProcessRequest{Id: p.GetId(), Condition: "log", Pattern: "^rea.y$", TimeoutMs: 20000})
	if err != nil || w.GetMatched() != "ready" {
		t.Fatalf("wait log: %+v %v", w, err)
	}
	info, _ := e.c.GetBackground(ctx, strconv.Itoa(int(p.GetPid())))
	if !info.GetStdout().GetTruncated() || info.GetStdout().GetEnd() != int64(len(allLines(2000))) {
		t.Fatalf("stdout ring: %+v (want truncated, end %d)", info.GetStdout(), len(allLines(2000)))
	}
	var got strings.Builder
	var gap int64
	err = e.c.BackgroundLogs(ctx, &agentv1.ProcessLogsRequest{Id: "talker", Stream: "stdout"}, func(ev *agentv1.ProcessLogsEvent) error {
		gap += ev.GetGap().GetDropped()
		got.Write(ev.GetData().GetData())
		return nil
	})
	if err != nil || got.Len() != 4096 || gap != info.GetStdout().GetStart() || !strings.HasSuffix(got.String(), "line1999\n") {
		t.Fatalf("logs: %d bytes, gap %d, err %v", got.Len(), gap, err)
	}
	killed, err := e.c.KillBackground(ctx, &agentv1.KillProcessRequest{Id: "talker", Signal: "SIGTERM", GraceMs: 2000})
	if err != nil || killed.GetStatus() != "killed" || killed.GetSignal() != "SIGTERM" {
		t.Fatalf("kill: %+v %v", killed, err)
	}

	// A process that dies before its port opens fails the wait at once,
	// quoting its output.
	if _, err := e.c.StartBackground(ctx, &agentv1.StartProcessRequest{Id: "crasher", Cmd: []string{"sh", "-c", "echo boom-detail >&2; exit 3"}}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.WaitBackground(ctx, &agentv1.WaitProcessRequest{Id: "crasher", Condition: "port", Port: 1, TimeoutMs: 600000})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "boom-detail") || !strings.Contains(err.Error(), "code 3") {
		t.Fatalf("wait on a dead process: %v", err)
	}
	// A follow of an ended process ends with its record.
	var last *agentv1.BackgroundProcess
	err = e.c.BackgroundLogs(ctx, &agentv1.ProcessLogsRequest{Id: "crasher", Follow: true}, func(ev *agentv1.ProcessLogsEvent) error {
		if ev.GetEnd() != nil {
			last = ev.GetEnd()
		}
		return nil
	})
	if err != nil || last.GetStatus() != "exited" || last.GetExitCode() != 3 {
		t.Fatalf("follow: %+v %v", last, err)
	}
	if _, err := e.c.StartBackground(ctx, &agentv1.StartProcessRequest{Id: "1bad", Cmd: []string{"true"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := e.c.StartBackground(ctx, &agentv1.StartProcessRequest{Cmd: []string{"no-such-command-here"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing command: %v", err)
	}
}

func allLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line%d\n", i)
	}
	return b.String()
}
