package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// launchStandalone runs the test binary as an agent of its own (see
// TestMain) on a socket of its own, and kills it when the test ends.
// exited receives the process's end; whoever takes it puts it back for
// the cleanup.
func launchStandalone(t *testing.T) (sock string, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock = filepath.Join(sockDir, "a.sock")
	passwd := fmt.Sprintf("user:x:%d:%d::%s:/bin/sh\n", os.Getuid(), os.Getgid(), dir)
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PADDOCK_AGENT_TEST_MAIN=1", "PADDOCK_AGENT_TEST_SOCKET="+sock, "PADDOCK_AGENT_TEST_ETC="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return sock, cmd, exited
}

// startStandalone launches a standalone agent and returns its client,
// once ready, and its pid.
func startStandalone(t *testing.T) (*client.Client, int) {
	t.Helper()
	sock, cmd, _ := launchStandalone(t)
	c := client.New(sock)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c, cmd.Process.Pid
}

func procsByCmd(list []api.Proc) map[string]api.Proc {
	out := map[string]api.Proc{}
	for _, p := range list {
		out[strings.Join(p.Cmd, " ")] = p
	}
	return out
}

// TestKillAllStandalone lists and ends what an exec left running. The
// agent here is not PID 1, so it keeps to itself and its descendants,
// which is also what keeps this test from touching the host's processes.
// It goes through the daemon's client, so the two sides' routes agree.
func TestKillAllStandalone(t *testing.T) {
	c, agentPid := startStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	res, err := c.Exec(ctx, client.ExecOptions{Cmd: []string{"sh", "-c", "sleep 1000 & sleep 1001 & exit 0"}}, nil, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	// A session's shell and a background process are processes too.
	if _, err := c.CreateSession(ctx, &agentv1.CreateSessionRequest{Name: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartBackground(ctx, &agentv1.StartProcessRequest{Id: "keeper", Cmd: []string{"sleep", "1003"}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.Procs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byCmd := procsByCmd(list.Procs)
	sleep := byCmd["sleep 1000"]
	if sleep.Pid == 0 || byCmd["sleep 1001"].Pid == 0 {
		t.Fatalf("the sleeps an exec left behind are not listed: %+v", list.Procs)
	}
	// The shell is gone, so the sleep was handed to the agent.
	if sleep.PPid != agentPid || sleep.UID != uint32(os.Getuid()) || sleep.State != "S" || sleep.StartedAt.IsZero() || sleep.Agent {
		t.Errorf("sleep: %+v", sleep)
	}
	var agents []api.Proc
	for _, p := range list.Procs {
		if p.Agent {
			agents = append(agents, p)
		}
	}
	if len(agents) != 1 || agents[0].Pid != agentPid {
		t.Fatalf("agent marked on %+v, want pid %d", agents, agentPid)
	}

	killed, err := c.KillAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two sleeps, the session's shell, the background process.
	if killed.Killed != 4 || len(killed.Remaining) != 0 || killed.Rounds < 1 {
		t.Fatalf("kill-all: %+v", killed)
	}
	bg, err := c.WaitBackground(ctx, &agentv1.WaitProcessRequest{Id: "keeper", Condition: api.WaitExit, TimeoutMs: 10000})
	if err != nil || bg.GetProcess().GetStatus() != "killed" || bg.GetProcess().GetSignal() != "SIGKILL" {
		t.Fatalf("background process after kill-all: %+v %v", bg.GetProcess(), err)
	}
	var sess *agentv1.SessionInfo
	for range 100 {
		list, err := c.ListSessions(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("sessions: %v %v", list, err)
		}
		if sess = list[0]; sess.GetShellSignal() != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sess.GetShellEnded() || sess.GetShellSignal() != "SIGKILL" || sess.GetPid() != 0 {
		t.Fatalf("session after kill-all: %+v", sess)
	}
	list, err = c.Procs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Procs {
		if !p.Agent && p.State != "Z" {
			t.Errorf("still alive after kill-all: %+v", p)
		}
	}
	// The agent still serves.
	res, err = c.Exec(ctx, client.ExecOptions{Cmd: []string{"true"}}, nil, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec after kill-all: %v %+v", err, res)
	}
	// The session's next command gets a fresh shell.
	end, err := c.ExecInSession(ctx, &agentv1.SessionExecRequest{Session: "s1", Command: "true"},
		func(*agentv1.SessionExecEvent) error { return nil })
	if err != nil || end.GetExitCode() != 0 {
		t.Fatalf("session exec after kill-all: %+v %v", end, err)
	}
	if sessions, err := c.ListSessions(ctx); err != nil || sessions[0].GetShellEnded() || sessions[0].GetPid() == 0 {
		t.Fatalf("session after its next command: %+v %v", sessions, err)
	}
}

// TestKillAllGrace gives a process that ends on SIGTERM the chance to,
// and kills the one that ignores it.
func TestKillAllGrace(t *testing.T) {
	c, _ := startStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Exec(ctx, client.ExecOptions{Cmd: []string{"sh", "-c",
		"(trap '' TERM; while :; do sleep 1; done) >/dev/null 2>&1 & sleep 1002 & exit 0"}}, nil, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	killed, err := c.KillAll(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// The sleep 1002, the subshell and its current sleep 1.
	if killed.Killed < 3 || len(killed.Remaining) != 0 {
		t.Fatalf("kill-all: %+v", killed)
	}
	if killed.Rounds < 1 {
		t.Errorf("the SIGTERM-ignoring loop ended without SIGKILL: %+v", killed)
	}
}

// TestKillAllDuringSessionCommand: a kill-all that ends a session's shell
// while a command runs ends the command by SIGKILL and leaves the shell
// ended, not replaced by one that would outlive the kill.
func TestKillAllDuringSessionCommand(t *testing.T) {
	c, _ := startStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type result struct {
		end *agentv1.SessionExecEvent_End
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := c.ExecInSession(ctx, &agentv1.SessionExecRequest{Session: "default", Command: "sleep 1004"},
			func(*agentv1.SessionExecEvent) error { return nil })
		done <- result{end, err}
	}()
	for i := 0; ; i++ {
		list, err := c.Procs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := procsByCmd(list.Procs)["sleep 1004"]; ok {
			break
		}
		if i > 200 {
			t.Fatalf("the session's command never started: %+v", list.Procs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.KillAll(ctx, 0); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.end.GetSignal() != "SIGKILL" || r.end.GetShellRestarted() || !strings.Contains(r.end.GetNote(), "killed") {
		t.Fatalf("the command's end: %+v %v", r.end, r.err)
	}
	list, err := c.ListSessions(ctx)
	if err != nil || len(list) != 1 || !list[0].GetShellEnded() || list[0].GetPid() != 0 {
		t.Fatalf("session after kill-all: %+v %v", list, err)
	}
}
