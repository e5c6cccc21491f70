package sessions_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// run execs cmd in session through the core, as the API does, and returns
// what it printed and its end event.
func run(t *testing.T, c *controller.Controller, ctx context.Context, session, cmd string) (string, api.ExecEvent) {
	t.Helper()
	var out strings.Builder
	var end api.ExecEvent
	err := c.Exec(ctx, "s", api.ExecRequest{Session: session, Cmd: []string{cmd}}, func(ev api.ExecEvent) error {
		switch ev.Type {
		case api.EventStdout:
			out.Write(ev.Data)
		case api.EventEnd:
			end = ev
		}
		return nil
	})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, session, err)
	}
	return out.String(), end
}

// TestSessionKeepsShellState: a session's shell keeps its directory and
// variables from one command to the next, each command is recorded in the
// ledger with its session, another key cannot reach it, and a deleted
// session is gone. No root: the process backend runs the real agent.
func TestSessionKeepsShellState(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c := env.Controller
	s := c.Sessions()
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	if _, err := c.Create(a, api.CreateSandboxRequest{Name: "s", Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sess, err := s.Create(a, "s", api.CreateSessionRequest{Name: "dev", Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Name != "dev" || sess.Pid == 0 {
		t.Fatalf("created %+v", sess)
	}
	if _, err := s.Create(b, "s", api.CreateSessionRequest{Name: "x"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key's create: %v, want not found", err)
	}

	run(t, c, a, "dev", "cd "+dir+" && export N=41")
	out, end := run(t, c, a, "dev", "echo $GREETING $((N+1)) $(pwd); false")
	if out != "hi 42 "+dir+"\n" || end.ExitCode == nil || *end.ExitCode != 1 {
		t.Errorf("second command printed %q, ended %+v", out, end)
	}
	list, err := s.List(a, "s")
	if err != nil || len(list) != 1 || list[0].Commands < 2 {
		t.Errorf("list %+v, %v", list, err)
	}

	for name, req := range map[string]api.ExecRequest{
		"env per command": {Session: "dev", Cmd: []string{"true"}, Env: map[string]string{"A": "b"}},
		"cwd per command": {Session: "dev", Cmd: []string{"true"}, Cwd: "/"},
		"empty command":   {Session: "dev", Cmd: []string{"  "}},
		"queue timeout":   {Session: "dev", Cmd: []string{"true"}, QueueTimeout: "2h"},
	} {
		if err := c.Exec(a, "s", req, func(api.ExecEvent) error { return nil }); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	if _, err := s.Create(a, "s", api.CreateSessionRequest{Name: "bad", Env: map[string]string{"PADDOCK_AGENT_X": "1"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a session with the agent's variable: %v", err)
	}

	var recorded int
	for _, e := range env.Ledger(a, t, "s") {
		if e.Kind == api.LedgerExec && e.Data["session"] == "dev" {
			recorded++
		}
	}
	if recorded != 2 {
		t.Errorf("%d session commands in the ledger, want 2", recorded)
	}

	if err := s.Delete(a, "s", "dev"); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(a, "s"); err != nil || len(list) != 0 {
		t.Errorf("after delete: %+v, %v", list, err)
	}
}
