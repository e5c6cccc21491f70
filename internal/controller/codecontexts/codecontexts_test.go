package codecontexts

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
	"github.com/paddock-dev/paddock/internal/store"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

// TestRunAndRecord: a Python context keeps its state between runs, a
// run's result and end are streamed, each run is in the sandbox's ledger
// with the context's language (remembered, or asked of the agent once
// forgotten), another key reaches none of it, and bad requests are
// refused before the agent. No root: the process backend, with the host's
// python3.
func TestRunAndRecord(t *testing.T) {
	env := controllertest.New(t, controllertest.Options{})
	c := env.Controller
	s := New(c, time.Minute)
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := controller.WithCaller(base, "aaaaaaaaaaaaaaaa", api.KeyScopeOwn)
	b := controller.WithCaller(base, "bbbbbbbbbbbbbbbb", api.KeyScopeOwn)
	sb, err := c.Create(a, api.CreateSandboxRequest{Name: "py", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	cx, err := s.Create(a, "py", api.CreateContextRequest{ID: "main", Language: "py"})
	if err != nil {
		t.Fatal(err)
	}
	if cx.ID != "main" || cx.Language != api.LanguagePython {
		t.Errorf("context: %+v", cx)
	}
	run := func(code string) (results []string, end api.RunCodeEvent) {
		t.Helper()
		err := s.Run(a, "py", "main", api.RunCodeRequest{Code: code}, func(ev api.RunCodeEvent) error {
			switch ev.Type {
			case api.RunEventResult:
				results = append(results, ev.Result["text/plain"])
			case api.EventEnd:
				end = ev
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return results, end
	}
	run("x = 40")
	if res, end := run("x + 2"); len(res) != 1 || res[0] != "42" || end.Status != api.RunOK {
		t.Fatalf("x + 2: %v, %+v", res, end)
	}
	// Forgotten (as after a daemon restart): the language is asked of the agent.
	s.langs = languages{}
	if _, end := run("raise ValueError('no')"); end.Status == api.RunOK {
		t.Errorf("a raise ended %+v", end)
	}
	var runs []store.LedgerEntry
	for _, e := range env.Ledger(a, t, "py") {
		if e.Kind == api.LedgerCodeRun {
			runs = append(runs, e)
		}
	}
	if len(runs) != 3 || runs[2].Data["language"] != api.LanguagePython || runs[2].Data["error"] != "ValueError" || runs[1].Data["code"] != "x + 2" {
		t.Errorf("code_run entries: %+v", runs)
	}
	if list, err := s.List(a, "py"); err != nil || len(list) != 1 || list[0].Runs != 3 {
		t.Errorf("list: %+v, %v", list, err)
	}

	if _, err := s.List(b, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b lists a's contexts: %v", err)
	}
	if err := s.Run(b, sb.ID, "main", api.RunCodeRequest{Code: "1"}, func(api.RunCodeEvent) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b runs code in a's context: %v", err)
	}
	if err := s.Delete(b, sb.ID, "main"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b deletes a's context: %v", err)
	}
	for name, err := range map[string]error{
		"language":      func() error { _, err := s.Create(a, "py", api.CreateContextRequest{Language: "cobol"}); return err }(),
		"user":          func() error { _, err := s.Create(a, "py", api.CreateContextRequest{User: "Not A User"}); return err }(),
		"empty code":    s.Run(a, "py", "main", api.RunCodeRequest{Code: "  "}, nil),
		"NUL":           s.Run(a, "py", "main", api.RunCodeRequest{Code: "1\x00"}, nil),
		"timeout":       s.Run(a, "py", "main", api.RunCodeRequest{Code: "1", Timeout: "soon"}, nil),
		"queue_timeout": s.Run(a, "py", "main", api.RunCodeRequest{Code: "1", QueueTimeout: "2h"}, nil),
	} {
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := s.Delete(a, "py", "main"); err != nil {
		t.Fatal(err)
	}
	if s.langs.get(sb.ID, "main") != "" {
		t.Error("a deleted context's language is still remembered")
	}
}

// TestLanguagesBounded: the remembered languages never pass their bound.
func TestLanguagesBounded(t *testing.T) {
	var l languages
	for i := range maxLanguages + 10 {
		l.remember("sb", strings.Repeat("c", 1+i%7)+string(rune('a'+i%26))+string(rune(i)), "python")
	}
	if n := len(l.m); n > maxLanguages {
		t.Fatalf("%d languages remembered, bound %d", n, maxLanguages)
	}
}
