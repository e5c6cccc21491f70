package adversarial

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// procsWith returns the processes of a listing whose command line is cmd.
func procsWith(list []api.Proc, cmd string) []api.Proc {
	var out []api.Proc
	for _, p := range list {
		if strings.Join(p.Cmd, " ") == cmd {
			out = append(out, p)
		}
	}
	return out
}

// alive leaves out the agent and zombies not reaped yet.
func alive(list []api.Proc) []api.Proc {
	var out []api.Proc
	for _, p := range list {
		if !p.Agent && p.State != "Z" && p.State != "X" {
			out = append(out, p)
		}
	}
	return out
}

// waitProcs polls the listing until ok accepts it.
func waitProcs(t *testing.T, ctx context.Context, c *paddock.Client, id, what string, ok func([]api.Proc) bool) []api.Proc {
	t.Helper()
	var list *api.ProcList
	var err error
	for range 200 {
		if list, err = c.Procs(ctx, id); err != nil {
			t.Fatalf("procs: %v", err)
		}
		if ok(list.Procs) {
			return list.Procs
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: the processes never got there: %+v", what, list.Procs)
	return nil
}

// TestSandboxProcs lists every process of a sandbox, not only Paddock's,
// and ends them all but the agent without a restart, on runc and gVisor:
// what an exec left behind, a session's shell, a background process and a
// tree that respawns its children all go; Paddock's own records say how
// they ended; the sandbox takes commands at once.
func TestSandboxProcs(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	for _, rt := range []string{api.RuntimeRunc, api.RuntimeGVisor} {
		t.Run(rt, func(t *testing.T) {
			if rt == api.RuntimeGVisor {
				requireGVisor(t)
			}
			ctx := ctxT(t, 5*time.Minute)
			sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: rt, KeepAlive: true})

			// `cmd &` of an exec outlives the exec, handed to the agent.
			if out, code := execOut(t, d, sb.ID, "sh", "-c", "sleep 1000 & exit 0"); code != 0 {
				t.Fatalf("exec: %d %s", code, out)
			}
			list, err := d.client.Procs(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			sleeps := procsWith(list.Procs, "sleep 1000")
			if len(sleeps) != 1 || sleeps[0].PPid != 1 || sleeps[0].User != "user" || sleeps[0].State != "S" ||
				sleeps[0].Agent || time.Since(sleeps[0].StartedAt) > time.Minute || time.Since(sleeps[0].StartedAt) < -time.Second {
				t.Fatalf("the sleep an exec left: %+v (all: %+v)", sleeps, list.Procs)
			}
			agent := list.Procs[0]
			if agent.Pid != 1 || !agent.Agent || agent.PPid != 0 || agent.User != "root" || agent.RSSBytes <= 0 {
				t.Fatalf("the agent: %+v", agent)
			}
			// Only the sandbox's own PID namespace: every process descends
			// from the agent, and nothing of the host (the daemon) shows.
			pids := map[int]bool{}
			for _, p := range list.Procs {
				pids[p.Pid] = true
			}
			for _, p := range list.Procs {
				if (!p.Agent && !pids[p.PPid]) || slices.Contains(p.Cmd, "serve") || (p.Agent != (p.Pid == 1)) {
					t.Errorf("a process from outside the sandbox is listed: %+v", p)
				}
			}

			// A session's shell, a background process, and a tree of loops
			// that fork their children again whenever they die.
			if _, err := d.client.CreateSession(ctx, sb.ID, api.CreateSessionRequest{Name: "s1"}); err != nil {
				t.Fatal(err)
			}
			if out := d.must("exec", sb.ID, "--session", "s1", "--", "cd /tmp"); out != "" {
				t.Fatalf("session exec: %q", out)
			}
			if _, err := d.client.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "keeper", Cmd: []string{"sleep", "1001"}}); err != nil {
				t.Fatal(err)
			}
			tree := `b() { if [ "$1" -eq 0 ]; then exec sleep 1002; fi; while :; do b $(($1-1)) & b $(($1-1)) & wait; done; }; b 3 >/dev/null 2>&1 </dev/null & exit 0`
			if out, code := execOut(t, d, sb.ID, "sh", "-c", tree); code != 0 {
				t.Fatalf("tree: %d %s", code, out)
			}
			before := waitProcs(t, ctx, d.client, sb.ID, "the tree's leaves", func(l []api.Proc) bool { return len(procsWith(l, "sleep 1002")) == 8 })
			t.Logf("%d processes before the kill", len(alive(before)))

			res, err := d.client.KillAll(ctx, sb.ID, api.KillAllRequest{})
			if err != nil {
				t.Fatal(err)
			}
			// sleep 1000, the shell, the keeper, 7 loops and 8 leaves.
			if len(res.Remaining) != 0 || res.Killed < 18 || res.Rounds < 1 {
				t.Fatalf("kill-all: %+v", res)
			}
			t.Logf("kill-all: killed %d in %d rounds", res.Killed, res.Rounds)
			after := waitProcs(t, ctx, d.client, sb.ID, "after kill-all", func(l []api.Proc) bool { return len(alive(l)) == 0 })
			if len(after) == 0 || !after[0].Agent {
				t.Fatalf("the agent is not listed after kill-all: %+v", after)
			}

			// The ledger records the kill.
			ledger, err := d.client.Ledger(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(ledger.Entries, func(e api.LedgerEntry) bool { return e.Kind == api.LedgerKillAll }); i < 0 ||
				ledger.Entries[i].Data["killed"] != strconv.Itoa(res.Killed) || ledger.Entries[i].Data["remaining"] != "0" {
				t.Errorf("no kill_all entry in the ledger: %+v", ledger.Entries)
			}

			// Paddock's own records say how their processes ended.
			p, err := d.client.GetProcess(ctx, sb.ID, "keeper")
			if err != nil || p.Status != api.ProcessKilled || p.Signal != "SIGKILL" || p.EndedAt == nil {
				t.Fatalf("background process after kill-all: %+v %v", p, err)
			}
			var s1 api.Session
			for range 100 {
				sessions, err := d.client.ListSessions(ctx, sb.ID)
				if err != nil || len(sessions) != 1 {
					t.Fatalf("sessions: %+v %v", sessions, err)
				}
				if s1 = sessions[0]; s1.ShellSignal != "" {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !s1.ShellEnded || s1.ShellSignal != "SIGKILL" || s1.Pid != 0 {
				t.Fatalf("session after kill-all: %+v", s1)
			}
			if out := d.must("session", "ls", sb.ID); !strings.Contains(out, "shell ended (SIGKILL)") {
				t.Errorf("session ls after kill-all:\n%s", out)
			}

			// No restart: the same sandbox takes commands at once, and the
			// session's next command gets a fresh shell.
			if out, code := execOut(t, d, sb.ID, "echo", "still here"); code != 0 || out != "still here\n" {
				t.Fatalf("exec after kill-all: %d %q", code, out)
			}
			if out := d.must("exec", sb.ID, "--session", "s1", "--", "pwd"); out != "/home/user\n" {
				t.Fatalf("session after kill-all: %q", out)
			}
			if got, err := d.client.Get(ctx, sb.ID); err != nil || got.State != api.StateRunning {
				t.Fatalf("sandbox after kill-all: %+v %v", got, err)
			}
			hist, err := d.client.History(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range hist.Changes {
				if c.To != api.StateCreating && c.To != api.StateRunning {
					t.Errorf("the sandbox changed state around kill-all: %+v", hist.Changes)
				}
			}

			// The CLI.
			out := d.must("proc", "ps", sb.ID)
			if !strings.Contains(out, "PPID") || !strings.Contains(out, "(paddock agent)") || !strings.Contains(out, "sh") {
				t.Errorf("paddock proc ps:\n%s", out)
			}
			if out := d.must("proc", "killall", sb.ID, "--grace", "1s"); !strings.Contains(out, "killed 1 processes") {
				t.Errorf("paddock proc killall (the session's shell): %q", out)
			}
			if _, errOut, code := d.run("proc", "killall", sb.ID, "--grace", "31s"); code == 0 || !strings.Contains(errOut, "grace") {
				t.Errorf("killall with too long a grace: exit %d, %q", code, errOut)
			}
		})
	}
}

// TestSandboxProcsForkBomb ends a fork bomb that fills the sandbox's pids
// limit, and the sandbox goes on, on runc and on gVisor (the pinned runsc
// enforces the limit inside its sentry; Debian's runsc applies none, so
// there a bomb ends the whole sandbox: docs/admission.md).
func TestSandboxProcsForkBomb(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	for _, rt := range []string{api.RuntimeRunc, api.RuntimeGVisor} {
		t.Run(rt, func(t *testing.T) {
			if rt == api.RuntimeGVisor {
				requireGVisor(t)
				if !runscLimitsTasks(t) {
					t.Skipf("%s applies no pids limit inside gVisor (Debian's runsc); the pinned build does (scripts/install-deps.sh)", runscBin())
				}
			}
			forkBomb(t, d, rt)
		})
	}
}

// runscLimitsTasks reports whether the test daemons' runsc enforces the
// pids limit inside the sandbox (it has --in-sandbox-cgroup).
func runscLimitsTasks(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command(runscBin(), "flags").CombinedOutput()
	if err != nil {
		t.Fatalf("%s flags: %v", runscBin(), err)
	}
	return strings.Contains(string(out), "-in-sandbox-cgroup ")
}

func forkBomb(t *testing.T, d *daemon, rt string) {
	ctx := ctxT(t, 5*time.Minute)
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: rt, Resources: api.Resources{Pids: 96}, KeepAlive: true})
	bomb := `b() { while :; do b & b & wait; done; }; b >/dev/null 2>&1 </dev/null & exit 0`
	if out, code := execOut(t, d, sb.ID, "sh", "-c", bomb); code != 0 {
		t.Fatalf("bomb: %d %s", code, out)
	}
	waitProcs(t, ctx, d.client, sb.ID, "the bomb", func(l []api.Proc) bool { return len(alive(l)) >= 40 })
	// The limit holds: the bomb never has more processes than it allows
	// (unbounded, it has hundreds within a second).
	for range 10 {
		list, err := d.client.Procs(ctx, sb.ID)
		if err != nil {
			t.Fatalf("procs during the bomb: %v", err)
		}
		if n := len(list.Procs); n > 96 {
			t.Fatalf("%d processes alive under a pids limit of 96", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err := d.client.KillAll(ctx, sb.ID, api.KillAllRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The bomb's processes also end on their own (a failed fork ends a
	// subshell), so the count at kill time is below the peak seen above.
	if len(res.Remaining) != 0 || res.Killed < 10 {
		t.Fatalf("kill-all: %+v", res)
	}
	t.Logf("kill-all: killed %d in %d rounds", res.Killed, res.Rounds)
	waitProcs(t, ctx, d.client, sb.ID, "after kill-all", func(l []api.Proc) bool { return len(alive(l)) == 0 })
	if out, code := execOut(t, d, sb.ID, "echo", "alive"); code != 0 || out != "alive\n" {
		t.Fatalf("exec after the bomb: %d %q", code, out)
	}
}

// TestSandboxProcsTenants: an own key neither sees nor ends another key's
// processes; it is told the sandbox does not exist.
func TestSandboxProcsTenants(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 5*time.Minute)
	a := newTenant(t, d, "procs-a", api.KeyScopeOwn)
	b := newTenant(t, d, "procs-b", api.KeyScopeOwn)
	sb, err := a.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox", KeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.sdk.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "mine", Cmd: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{sb.ID, sb.Name} {
		if ref == "" {
			continue
		}
		if _, err := b.sdk.Procs(ctx, ref); !errors.Is(err, paddock.ErrNotFound) {
			t.Errorf("b lists a's processes by %q: %v, want not found", ref, err)
		}
		if _, err := b.sdk.KillAll(ctx, ref, api.KillAllRequest{}); !errors.Is(err, paddock.ErrNotFound) {
			t.Errorf("b kills a's processes by %q: %v, want not found", ref, err)
		}
	}
	if p, err := a.sdk.GetProcess(ctx, sb.ID, "mine"); err != nil || p.Status != api.ProcessRunning {
		t.Fatalf("a's process after b's kill-all: %+v %v", p, err)
	}
	list, err := a.sdk.Procs(ctx, sb.ID)
	if err != nil || len(procsWith(list.Procs, "sleep 1000")) != 1 {
		t.Fatalf("a lists its own processes: %+v %v", list, err)
	}
}
