package terminals_test

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
	"github.com/paddock-dev/paddock/internal/controller/terminals"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// readUntil collects a terminal's output until it holds want.
func readUntil(t *testing.T, tc *terminals.Conn, want string) string {
	t.Helper()
	var out strings.Builder
	out.Write(tc.Replay())
	deadline := time.After(20 * time.Second)
	for !strings.Contains(out.String(), want) {
		select {
		case p := <-tc.Output():
			out.Write(p)
		case <-deadline:
			t.Fatalf("no %q in the terminal's output after 20s: %q", want, out.String())
		}
	}
	return out.String()
}

// TestTerminal: a terminal's process reads what a client types and prints
// to every client, a second client gets the replay, the end reaches the
// clients and the ledger, another key cannot reach it, and bad options are
// refused before the agent. No root: the process backend runs the real
// agent, which gives the process a real pseudo-terminal.
func TestTerminal(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c := env.Controller
	s := c.Terminals()
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	if _, err := c.Create(a, api.CreateSandboxRequest{Name: "t", Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}

	tc, err := s.Open(a, "t", terminals.Options{Cmd: []string{"sh", "-c", "echo ready; read x; echo got-$x; exit 4"}, Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	readUntil(t, tc, "ready")
	second, err := s.Attach(a, "t", tc.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if !strings.Contains(string(second.Replay()), "ready") {
		t.Errorf("second client's replay %q", second.Replay())
	}
	if _, err := s.Attach(b, "t", tc.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key's attach: %v, want not found", err)
	}
	list, err := s.List(a, "t")
	if err != nil || len(list) != 1 || list[0].ID != tc.ID() || list[0].Cols != 100 {
		t.Errorf("list %+v, %v", list, err)
	}

	if err := tc.Write(a, []byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, second, "got-hi")
	select {
	case <-tc.Ended():
	case <-time.After(20 * time.Second):
		t.Fatal("the terminal did not end")
	}
	if code, sig, failure := tc.Exit(); code != 4 || sig != "" || failure != "" {
		t.Errorf("exit %d %q %q, want 4", code, sig, failure)
	}

	for name, o := range map[string]terminals.Options{
		"size":    {Cols: 100000, Rows: 10},
		"user":    {User: "Not A User"},
		"env":     {Env: map[string]string{"1X": "y"}},
		"NUL arg": {Cmd: []string{"sh\x00"}},
	} {
		if _, err := s.Open(a, "t", o); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	if err := s.Kill(a, "t", "tnotthereatall"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("kill of an unknown terminal: %v", err)
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		var opened, ended bool
		for _, e := range env.Ledger(a, t, "t") {
			switch {
			case e.Kind == api.LedgerTerminalOpen && e.Data["terminal"] == tc.ID():
				opened = true
			case e.Kind == api.LedgerTerminalEnd && e.Data["terminal"] == tc.ID() && e.ExitCode != nil && *e.ExitCode == 4:
				ended = true
			}
		}
		if opened && ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger: opened %v, ended %v after 20s", opened, ended)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
