package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// hostProcGone waits until no process on the host has marker in its
// command line, so a test knows a sandbox process ended while the daemon
// was down (runc sandboxes share the host's view of /proc).
func hostProcGone(t *testing.T, marker string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		found := false
		ents, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range ents {
			b, err := os.ReadFile(f)
			if err == nil && strings.Contains(string(b), marker) {
				found = true
				break
			}
		}
		if !found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a process with %q is still running", marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killChildren kills the children of the host processes that have marker
// in their command line.
func killChildren(t *testing.T, marker string) {
	t.Helper()
	parents := map[string]bool{}
	ents, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range ents {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), marker) {
			parents[filepath.Base(filepath.Dir(f))] = true
		}
	}
	if len(parents) == 0 {
		t.Fatalf("no process with %q on the host", marker)
	}
	killed := 0
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && parents[fields[1]] {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatalf("no child of the process with %q to kill", marker)
	}
}

func findTerminal(ts []api.Terminal, id string) *api.Terminal {
	for i := range ts {
		if ts[i].ID == id {
			return &ts[i]
		}
	}
	return nil
}

// shellSurvives opens a shell, gives it state, takes the daemon down with
// down, starts it again and checks the shell goes on where it was.
func shellSurvives(t *testing.T, d *daemon, sbID string, down func(), waitEnd bool) {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	term, err := d.client.OpenTerminal(ctx, sbID, paddock.TerminalOptions{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	id := term.ID()
	fmt.Fprint(term, "cd /tmp; X=42; echo before-$((40+2))\n")
	readUntil(t, term, "before-42")
	// Printed whether or not a daemon is there to follow it.
	fmt.Fprint(term, "sleep 1; echo during-$((3*3))\n")
	// Keys still on their way through a daemon that is killed are lost;
	// the terminal's echo shows these reached the shell.
	readUntil(t, term, "during-$((3*3))")
	down()
	d.start()

	ts, err := d.client.Terminals(ctx, sbID)
	if err != nil {
		t.Fatal(err)
	}
	got := findTerminal(ts, id)
	if got == nil || got.Exited || got.Cols != 100 || got.Rows != 30 || got.Pid == 0 {
		t.Fatalf("terminal %s after the restart: %+v (all: %+v)", id, got, ts)
	}
	again, err := d.client.AttachTerminal(ctx, sbID, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	out := readUntil(t, again, "during-9")
	if !strings.Contains(out, "before-42") {
		t.Fatalf("replay lacks the output from before the restart: %q", out)
	}
	fmt.Fprint(again, "echo \"$X $PWD\"\n")
	readUntil(t, again, "42 /tmp")
	if err := again.Resize(ctx, 70, 21); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(again, "stty size\n")
	readUntil(t, again, "21 70")
	if err := again.Signal(ctx, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	if !waitEnd {
		return
	}
	ex, err := again.Wait(ctx)
	if err != nil || ex.Signal != "SIGKILL" {
		t.Fatalf("Wait after SIGKILL = %+v, %v", ex, err)
	}
}

// Terminals live in the sandbox's agent, not in the daemon: a daemon that
// stops (gracefully or not) and starts again finds them, replays their
// recent output and goes on where they were.
func TestTerminalSurvivesRestart(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Name: "termrestart"})
	ctx := ctxT(t, 5*time.Minute)

	restarts := []struct {
		name string
		down func()
	}{
		{"SIGTERM", d.stop},
		{"kill -9", d.kill9},
	}
	for _, rs := range restarts {
		t.Run("shell keeps its state across "+rs.name, func(t *testing.T) {
			shellSurvives(t, d, sb.ID, rs.down, true)
		})
	}

	t.Run("5 terminals survive", func(t *testing.T) {
		const n = 5
		ids := make([]string, n)
		for i := range n {
			term, err := d.client.OpenTerminal(ctx, sb.ID, paddock.TerminalOptions{Cmd: []string{"sh"}})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = term.ID()
			fmt.Fprintf(term, "Y=v$((%d*11)); echo set-$Y\n", i)
			readUntil(t, term, fmt.Sprintf("set-v%d", i*11))
			term.Close()
		}
		d.stop()
		d.start()
		ts, err := d.client.Terminals(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		listed := d.must("terminals", sb.ID)
		for i, id := range ids {
			if x := findTerminal(ts, id); x == nil || x.Exited {
				t.Fatalf("terminal %d (%s) after the restart: %+v", i, id, x)
			}
			if !strings.Contains(listed, id) {
				t.Fatalf("paddock terminals after the restart lacks %s:\n%s", id, listed)
			}
			term, err := d.client.AttachTerminal(ctx, sb.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprint(term, "echo got-$Y; exit 3\n")
			readUntil(t, term, fmt.Sprintf("got-v%d", i*11))
			if ex, err := term.Wait(ctx); err != nil || ex.ExitCode != 3 {
				t.Fatalf("terminal %d: Wait = %+v, %v", i, ex, err)
			}
			term.Close()
		}
	})

	t.Run("a terminal that ended while the daemon was down reports its exit", func(t *testing.T) {
		marker := uniqueName("ended")
		term, err := d.client.OpenTerminal(ctx, sb.ID, paddock.TerminalOptions{
			Cmd: []string{"sh", "-c", "echo started-$0; sleep 100000; exit 9", marker},
		})
		if err != nil {
			t.Fatal(err)
		}
		id := term.ID()
		readUntil(t, term, "started-"+marker)
		d.kill9()
		// With no daemon to type into the terminal, end the shell's sleep
		// from the host; the shell then exits 9 on its own.
		killChildren(t, marker)
		hostProcGone(t, marker)
		d.start()
		ts, err := d.client.Terminals(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		x := findTerminal(ts, id)
		if x == nil || !x.Exited || x.ExitCode == nil || *x.ExitCode != 9 {
			t.Fatalf("terminal after ending while the daemon was down: %+v (all: %+v)", x, ts)
		}
		again, err := d.client.AttachTerminal(ctx, sb.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { again.Close() })
		readUntil(t, again, "started-"+marker)
		ex, err := again.Wait(ctx)
		if err != nil || ex.ExitCode != 9 {
			t.Fatalf("Wait = %+v, %v; want exit 9", ex, err)
		}
	})

	t.Run("terminals of a stopped or deleted sandbox are a clear error", func(t *testing.T) {
		other := create(t, d, api.CreateSandboxRequest{Name: uniqueName("termgone")})
		ids := make([]string, 2)
		for i := range ids {
			term, err := d.client.OpenTerminal(ctx, other.ID, paddock.TerminalOptions{Cmd: []string{"sh"}})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = term.ID()
			term.Close()
		}
		// The sandbox stops while no daemon runs: its container dies.
		d.stop()
		root := filepath.Join(d.stateDir, "runtime", "runc", "state")
		if out, err := exec.Command("runc", "--root", root, "kill", other.ID, "KILL").CombinedOutput(); err != nil {
			t.Fatalf("runc kill: %v: %s", err, out)
		}
		for deadline := time.Now().Add(time.Minute); ; {
			out, _ := exec.Command("runc", "--root", root, "state", other.ID).CombinedOutput()
			if !strings.Contains(string(out), `"running"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("container still running after SIGKILL: %s", out)
			}
			time.Sleep(50 * time.Millisecond)
		}
		d.start()
		if ts, err := d.client.Terminals(ctx, other.ID); err != nil || len(ts) != 0 {
			t.Fatalf("terminals of a sandbox stopped while the daemon was down: %+v, %v", ts, err)
		}
		_, err := d.client.AttachTerminal(ctx, other.ID, ids[0])
		if !errors.Is(err, paddock.ErrNotFound) || !strings.Contains(err.Error(), "stopped") {
			t.Fatalf("attach to a terminal of a stopped sandbox: %v", err)
		}
		if err := d.client.Delete(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		_, err = d.client.AttachTerminal(ctx, other.ID, ids[1])
		if !errors.Is(err, paddock.ErrNotFound) || !strings.Contains(err.Error(), "sandbox") {
			t.Fatalf("attach to a terminal of a deleted sandbox: %v", err)
		}
	})
}

func TestTerminalSurvivesRestartGVisor(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Runtime: api.RuntimeGVisor})
	shellSurvives(t, d, sb.ID, d.kill9, true)
}
