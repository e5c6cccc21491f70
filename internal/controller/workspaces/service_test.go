package workspaces

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
	"github.com/paddock-dev/paddock/internal/workspace"
)

func TestMain(m *testing.M) {
	processbackend.RunAgentIfChild()
	os.Exit(m.Run())
}

func newService(t *testing.T) *Service {
	t.Helper()
	env := controllertest.New(t, controllertest.Options{})
	st, err := workspace.Open(context.Background(), filepath.Join(t.TempDir(), "workspaces.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(env.Controller, st, controllertest.Logger(t))
}

// TestTenancy: workspaces are owned, named per owner and seen by scope,
// through every call of the subsystem, without root (the controller runs
// on the process backend; the shell executor needs no sandbox).
func TestTenancy(t *testing.T) {
	s := newService(t)
	bg := context.Background()
	a := controller.WithCaller(bg, "key-a", api.KeyScopeOwn)
	b := controller.WithCaller(bg, "key-b", api.KeyScopeOwn)
	ops := controller.WithCaller(bg, "key-ops", api.KeyScopeAll)

	wa, err := s.Create(a, api.CreateWorkspaceRequest{Name: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(b, api.CreateWorkspaceRequest{Name: "dev"}); err != nil {
		t.Fatalf("b's own dev beside a's: %v", err)
	}
	if _, err := s.Create(a, api.CreateWorkspaceRequest{Name: "dev"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a's second dev: %v", err)
	}
	if _, err := s.WriteFile(a, "dev", "secret.txt", 0, -1, strings.NewReader("a's")); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Run(a, "dev", api.WorkspaceRunRequest{Script: "cat secret.txt"}); err != nil || res.Stdout != "a's" {
		t.Fatalf("a reads its file: %+v, %v", res, err)
	}
	// b, by a's id: not found, as for nothing at all; by the name: its own.
	for name, call := range map[string]func(ref string) error{
		"get":      func(ref string) error { _, err := s.Get(b, ref); return err },
		"run":      func(ref string) error { _, err := s.Run(b, ref, api.WorkspaceRunRequest{Script: "true"}); return err },
		"read":     func(ref string) error { _, err := s.ReadFile(b, ref, "secret.txt", -1); return err },
		"write":    func(ref string) error { _, err := s.WriteFile(b, ref, "x", 0, -1, strings.NewReader("x")); return err },
		"history":  func(ref string) error { _, err := s.History(b, ref, 0); return err },
		"ledger":   func(ref string) error { _, err := s.Ledger(b, ref, 0, 0); return err },
		"prune":    func(ref string) error { _, err := s.Prune(b, ref, 1); return err },
		"rollback": func(ref string) error { _, err := s.Rollback(b, ref, 0); return err },
		"export":   func(ref string) error { return s.Export(b, ref, io.Discard) },
		"delete":   func(ref string) error { return s.Delete(b, ref) },
	} {
		theirs, none := call(wa.ID), call("nosuchworkspace")
		if !errors.Is(theirs, errdefs.ErrNotFound) || !errors.Is(none, errdefs.ErrNotFound) || theirs.Error() != strings.Replace(none.Error(), "nosuchworkspace", wa.ID, 1) {
			t.Errorf("%s of another's workspace: %v; of none: %v", name, theirs, none)
		}
	}
	if _, err := s.ReadFile(b, "dev", "secret.txt", -1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("b's own dev shows a's file: %v", err)
	}
	if list, _ := s.List(b); len(list) != 1 || list[0].ID == wa.ID {
		t.Fatalf("b lists %+v", list)
	}
	if list, _ := s.List(ops); len(list) != 2 {
		t.Fatalf("a key of scope all lists %d workspaces, want 2", len(list))
	}
	if _, err := s.Get(bg, wa.ID); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Fatalf("a context with no caller: %v", err)
	}
	var none *Service
	if _, err := none.List(a); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("a daemon without workspaces: %v", err)
	}
}
