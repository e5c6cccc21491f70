package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// The test binary doubles as a standalone agent, so PID-1 duties (reaping
// orphans, SIGTERM shutdown) are tested in a process of their own: the
// agent's reaper owns every wait in its process, which a test process that
// waits on its own children cannot share.
func TestMain(m *testing.M) {
	if os.Getenv("PADDOCK_AGENT_TEST_MAIN") == "1" {
		os.Exit(agentMain())
	}
	os.Exit(m.Run())
}

func agentMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ln, err := ListenUnix(os.Getenv("PADDOCK_AGENT_TEST_SOCKET"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a := New(Options{EtcDir: os.Getenv("PADDOCK_AGENT_TEST_ETC"), ShutdownGrace: time.Second})
	d, stopDetach := UnixDetach(os.Getenv("PADDOCK_AGENT_TEST_SOCKET"))
	defer stopDetach()
	if err := a.ServeDetachable(ctx, ln, d); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// procStat returns the state and parent pid of pid, ok=false if gone.
func procStat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

func zombieChildren(parent int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if st, ppid, ok := procStat(pid); ok && ppid == parent && st == "Z" {
			out = append(out, pid)
		}
	}
	return out
}

func TestStandaloneAgent(t *testing.T) {
	sock, cmd, exited := launchStandalone(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := client.New(sock)
	defer c.Close()
	start := time.Now()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent ready after %v", time.Since(start))

	// The environment of the agent's own settings is not passed on.
	var out strings.Builder
	res, err := c.Exec(ctx, client.ExecOptions{Cmd: []string{"sh", "-c", "env; sleep 0.2 & exit 0"}}, nil,
		func(_ int, p []byte) error { out.Write(p); return nil })
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if strings.Contains(out.String(), "PADDOCK_AGENT_TEST") {
		t.Errorf("agent settings leaked into the process environment")
	}
	// The orphaned sleep is reparented to the agent, which must reap it.
	time.Sleep(700 * time.Millisecond)
	if z := zombieChildren(cmd.Process.Pid); len(z) > 0 {
		t.Errorf("zombies left under the agent: %v", z)
	}

	// A process that ignores SIGTERM is killed at shutdown, and the agent
	// exits 0.
	stdin := false
	stream, err := c.Process().Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "sh", Args: []string{"-c", "trap '' TERM; echo up; while :; do sleep 1; done"}},
		Stdin:   &stdin,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	pid := int(stream.Msg().GetEvent().GetStart().GetPid())
	for stream.Receive() && stream.Msg().GetEvent().GetData() == nil {
	}
	t.Logf("sending SIGTERM at %v", time.Since(start))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("agent exited with %v, want 0", err)
		}
		t.Logf("agent exited at %v", time.Since(start))
		exited <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not exit after SIGTERM")
	}
	if st, _, ok := procStat(pid); ok && st != "Z" {
		t.Errorf("process %d survived the agent's shutdown (state %s)", pid, st)
	}
}
