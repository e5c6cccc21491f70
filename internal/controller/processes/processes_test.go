package processes_test

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
	"github.com/paddock-dev/paddock/internal/controller/processes"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// TestBackgroundProcess: a process started in a sandbox runs on after the
// call, is found by id, waited for by a line of its output, read back,
// and its start and end reach the sandbox's ledger; another key cannot
// reach it, and bad requests are refused before the agent. No root: the
// process backend runs the real agent as a child process.
func TestBackgroundProcess(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c := env.Controller
	s := c.Processes()
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	if _, err := c.Create(a, api.CreateSandboxRequest{Name: "p", Image: controllertest.Image}); err != nil {
		t.Fatal(err)
	}

	p, err := s.Start(a, "p", api.StartProcessRequest{ID: "job", Cmd: []string{"sh", "-c", "echo ready; sleep 0.3; echo done; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "job" || p.Pid == 0 {
		t.Fatalf("started %+v", p)
	}
	if _, err := s.Start(b, "p", api.StartProcessRequest{Cmd: []string{"true"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key's start: %v, want not found", err)
	}
	if _, err := s.Get(b, "p", "job"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another key's get: %v, want not found", err)
	}

	w, err := s.Wait(a, "p", "job", api.WaitProcessRequest{For: api.WaitLog, Pattern: "ready", Timeout: "20s"})
	if err != nil || !strings.Contains(w.Matched, "ready") {
		t.Fatalf("wait for the line: %+v, %v", w, err)
	}
	w, err = s.Wait(a, "p", "job", api.WaitProcessRequest{For: api.WaitExit, Timeout: "20s"})
	if err != nil || w.Process.ExitCode == nil || *w.Process.ExitCode != 3 {
		t.Fatalf("wait for the exit: %+v, %v", w, err)
	}
	var out strings.Builder
	err = s.Logs(a, "p", "job", processes.LogsOptions{Stream: api.LogStdout}, func(ev api.ProcessLogEvent) error {
		out.Write(ev.Data)
		return nil
	})
	if err != nil || out.String() != "ready\ndone\n" {
		t.Errorf("logs %q, %v", out.String(), err)
	}
	list, err := s.List(a, "p")
	if err != nil || len(list) != 1 || list[0].ID != "job" || list[0].EndedAt == nil {
		t.Errorf("list %+v, %v", list, err)
	}

	for name, call := range map[string]func() error{
		"empty command": func() error { _, err := s.Start(a, "p", api.StartProcessRequest{}); return err },
		"log buffer": func() error {
			_, err := s.Start(a, "p", api.StartProcessRequest{Cmd: []string{"true"}, LogBufferBytes: 1})
			return err
		},
		"process ref":    func() error { _, err := s.Get(a, "p", "a/b"); return err },
		"wait condition": func() error { _, err := s.Wait(a, "p", "job", api.WaitProcessRequest{For: "never"}); return err },
		"wait port":      func() error { _, err := s.Wait(a, "p", "job", api.WaitProcessRequest{For: api.WaitPort}); return err },
		"kill grace":     func() error { _, err := s.Kill(a, "p", "job", api.KillProcessRequest{Grace: "forever"}); return err },
		"log stream": func() error {
			return s.Logs(a, "p", "job", processes.LogsOptions{Stream: "both-and-more"}, func(api.ProcessLogEvent) error { return nil })
		},
	} {
		if err := call(); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}

	// The end is recorded by the daemon's own wait, in the background.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var start, end *store.LedgerEntry
		for _, e := range env.Ledger(a, t, "p") {
			switch e.Kind {
			case api.LedgerProcessStart:
				start = &e
			case api.LedgerProcessEnd:
				end = &e
			}
		}
		if start != nil && end != nil {
			if start.Data["process"] != "job" || end.ExitCode == nil || *end.ExitCode != 3 || end.Data["status"] == "" {
				t.Errorf("ledger start %+v end %+v", start, end)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger has start %v end %v after 20s", start != nil, end != nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
