package controller_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/controllertest"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
	"github.com/paddock-dev/paddock/internal/runtime/processbackend"
)

// These tests drive the controller against the real agent, run by
// processbackend as a plain child process: lifecycle, exec and tenancy
// without root or containers. The sandboxes isolate nothing.

// newProcessController returns a started controller on a processbackend.
func newProcessController(t *testing.T) (*controller.Controller, *processbackend.Backend) {
	t.Helper()
	env := controllertest.New(t, controllertest.Options{})
	return env.Controller, env.Backend
}

// execOut runs cmd in a sandbox and returns its stdout and exit code.
func execOut(ctx context.Context, t *testing.T, c *controller.Controller, ref string, cmd ...string) (string, int) {
	t.Helper()
	var out strings.Builder
	code := -100
	err := c.Exec(ctx, ref, api.ExecRequest{Cmd: cmd}, func(ev api.ExecEvent) error {
		switch ev.Type {
		case api.EventStdout:
			out.Write(ev.Data)
		case api.EventEnd:
			if ev.Error != nil {
				t.Errorf("exec %q ended with %s: %s", cmd, ev.Error.Code, ev.Error.Message)
			}
			if ev.ExitCode != nil {
				code = *ev.ExitCode
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return out.String(), code
}

func TestProcessLifecycle(t *testing.T) {
	c, b := newProcessController(t)
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()

	sb, err := c.Create(ctx, api.CreateSandboxRequest{Name: "life", Image: controllertest.Image, Env: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if sb.State != api.StateRunning {
		t.Fatalf("created sandbox is %s, want running", sb.State)
	}
	if out, code := execOut(ctx, t, c, "life", "sh", "-c", `echo "$GREETING"; echo kept > keep`); code != 0 || out != "hello\n" {
		t.Fatalf("exec = %q, exit %d; want the sandbox's env and exit 0", out, code)
	}
	if _, code := execOut(ctx, t, c, sb.ID, "sh", "-c", "exit 3"); code != 3 {
		t.Errorf("exit code = %d, want 3", code)
	}
	if _, code := execOut(ctx, t, c, sb.ID, "no-such-command-here"); code != controller.ExitCommandNotFound {
		t.Errorf("missing command exits %d, want %d", code, controller.ExitCommandNotFound)
	}

	if sb, err = c.Stop(ctx, sb.ID); err != nil || sb.State != api.StateStopped {
		t.Fatalf("Stop = %+v, %v; want stopped", sb, err)
	}
	if st, err := b.Status(ctx, sb.ID); err != nil || st != runtime.StatusStopped {
		t.Fatalf("backend says %s, %v after Stop; want stopped", st, err)
	}
	if sb, err = c.StartSandbox(ctx, sb.ID); err != nil || sb.State != api.StateRunning {
		t.Fatalf("StartSandbox = %+v, %v; want running", sb, err)
	}
	if out, _ := execOut(ctx, t, c, sb.ID, "cat", "keep"); out != "kept\n" {
		t.Errorf("file written before stop reads %q after start, want %q", out, "kept\n")
	}
	// A request to a stopped sandbox starts it again.
	if _, err := c.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if out, code := execOut(ctx, t, c, sb.ID, "cat", "keep"); code != 0 || out != "kept\n" {
		t.Errorf("exec in a stopped sandbox = %q, exit %d; want it started and the file kept", out, code)
	}

	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.Get(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if _, err := b.Status(ctx, sb.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("backend Status after Delete = %v, want ErrNotFound", err)
	}
}

// TestProcessErrors: user mistakes come back as their error class, and a
// backend that cannot start the agent leaves the sandbox in state error.
func TestProcessErrors(t *testing.T) {
	c, _ := newProcessController(t)
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Image: "no-such-image"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Create with an unknown image = %v, want ErrNotFound", err)
	}
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Name: "Not A Name!", Image: controllertest.Image}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Create with a bad name = %v, want ErrInvalidArgument", err)
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, sb.ID, api.ExecRequest{}, func(api.ExecEvent) error { return nil }); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Exec with no command = %v, want ErrInvalidArgument", err)
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSandbox(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("StartSandbox of a deleted sandbox = %v, want ErrNotFound", err)
	}

	// An agent that cannot start: the create fails, the record says why.
	broken := controllertest.New(t, controllertest.Options{Backend: processbackend.Options{Agent: filepath.Join(t.TempDir(), "missing")}}).Controller
	_, err = broken.Create(ctx, api.CreateSandboxRequest{Name: "broken", Image: controllertest.Image})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Create with no agent = %v, want ErrUnavailable", err)
	}
	got, err := broken.Get(ctx, "broken")
	if err != nil || got.State != api.StateError || got.ErrorReason == "" {
		t.Errorf("sandbox whose agent did not start = %+v, %v; want state error with a reason", got, err)
	}
}

// TestProcessAgentDeath: an agent killed from outside puts its sandbox in
// state error with the backend's reason, and a start brings it back.
func TestProcessAgentDeath(t *testing.T) {
	c, b := newProcessController(t)
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Signal(ctx, sb.ID, 9); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.Get(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == api.StateError {
			if !strings.Contains(got.ErrorReason, "signal 9") {
				t.Errorf("error reason = %q, want the agent's signal", got.ErrorReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox is %s 30s after its agent was killed, want error", got.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sb, err = c.StartSandbox(ctx, sb.ID); err != nil || sb.State != api.StateRunning {
		t.Fatalf("StartSandbox after death = %+v, %v; want running", sb, err)
	}
	if out, code := execOut(ctx, t, c, sb.ID, "echo", "back"); code != 0 || out != "back\n" {
		t.Errorf("exec after restart = %q, %d", out, code)
	}
}

// TestProcessTenancy: a key of scope own sees and touches only its own
// sandboxes; to it another key's sandbox does not exist.
func TestProcessTenancy(t *testing.T) {
	c, _ := newProcessController(t)
	base, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const keyA, keyB = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	ctxA := controller.WithCaller(base, keyA, api.KeyScopeOwn)
	ctxB := controller.WithCaller(base, keyB, api.KeyScopeOwn)

	sb, err := c.Create(ctxA, api.CreateSandboxRequest{Name: "mine", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := c.List(ctxB, nil); err != nil || len(list) != 0 {
		t.Errorf("another key lists %v, %v; want nothing", list, err)
	}
	for _, ref := range []string{sb.ID, "mine"} {
		if _, err := c.Get(ctxB, ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("another key's Get(%s) = %v, want ErrNotFound", ref, err)
		}
		if _, err := c.Stop(ctxB, ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("another key's Stop(%s) = %v, want ErrNotFound", ref, err)
		}
		err := c.Exec(ctxB, ref, api.ExecRequest{Cmd: []string{"true"}}, func(api.ExecEvent) error { return nil })
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("another key's Exec(%s) = %v, want ErrNotFound", ref, err)
		}
		if err := c.Delete(ctxB, ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("another key's Delete(%s) = %v, want ErrNotFound", ref, err)
		}
	}
	// The other key may take the same name: names are per owner.
	if _, err := c.Create(ctxB, api.CreateSandboxRequest{Name: "mine", Image: controllertest.Image}); err != nil {
		t.Errorf("another key's Create with the same name: %v", err)
	}
	// The owner still has its sandbox, running and whole.
	if list, err := c.List(ctxA, nil); err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("owner lists %v, %v; want only %s", list, err, sb.ID)
	}
	if out, code := execOut(ctxA, t, c, "mine", "echo", "ok"); code != 0 || out != "ok\n" {
		t.Errorf("owner's exec = %q, %d", out, code)
	}
}

// A command cut because its sandbox was destroyed while it ran ends with
// not found and the destroy's reason, not the broken connection's words.
func TestProcessExecCutByDestroy(t *testing.T) {
	c, _ := newProcessController(t)
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), 2*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: controllertest.Image})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	started := make(chan struct{})
	ended := make(chan *api.Error, 1)
	go func() {
		var endErr *api.Error
		err := c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: []string{"sleep", "60"}}, func(ev api.ExecEvent) error {
			switch ev.Type {
			case api.EventStart:
				close(started)
			case api.EventEnd:
				endErr = ev.Error
				if endErr == nil {
					endErr = &api.Error{Code: "none", Message: fmt.Sprintf("exit %v signal %q", ev.ExitCode, ev.Signal)}
				}
			}
			return nil
		})
		if err != nil {
			endErr = &api.Error{Code: errdefs.Code(err), Message: err.Error()}
		}
		ended <- endErr
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the command did not start")
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	select {
	case e := <-ended:
		if e == nil || e.Code != errdefs.Code(errdefs.ErrNotFound) || !strings.Contains(e.Message, "was destroyed while the request ran (delete requested)") {
			t.Fatalf("the cut command ended with %+v, want not found naming the delete", e)
		}
	case <-ctx.Done():
		t.Fatal("the command did not end after its sandbox was destroyed")
	}
}

// TestSetOnIdle: the idle policy of a sandbox can be changed after create;
// an unknown one is invalid, and hibernate is refused on a backend that
// cannot keep memory (here: plain processes), leaving the policy as it was.
func TestSetOnIdle(t *testing.T) {
	c, _ := newProcessController(t)
	ctx, cancel := context.WithTimeout(controller.System(context.Background()), time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: controllertest.Image, SleepAfter: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.SetOnIdle(ctx, sb.ID, api.OnIdlePause); err != nil || got.OnIdle != api.OnIdlePause {
		t.Fatalf("SetOnIdle pause = %+v, %v", got, err)
	}
	if _, err := c.SetOnIdle(ctx, sb.ID, "nap"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("SetOnIdle nap: %v; want invalid", err)
	}
	if _, err := c.SetOnIdle(ctx, sb.ID, api.OnIdleHibernate); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("SetOnIdle hibernate on plain processes: %v; want a failed precondition", err)
	}
	if got, err := c.Get(ctx, sb.ID); err != nil || got.OnIdle != api.OnIdlePause {
		t.Errorf("after the refusals: %+v, %v; want on_idle still pause", got, err)
	}
	if _, err := c.SetOnIdle(ctx, "no-such-sandbox", api.OnIdleStop); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("SetOnIdle on a missing sandbox: %v; want not found", err)
	}
}
