package adversarial

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestAgentOOMScore: the agent (PID 1) is the OOM killer's last choice in
// its sandbox, and what it starts is back at the ordinary score, so a
// sandbox out of memory loses a user process and not its agent.
func TestAgentOOMScore(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	out, code := execOut(t, d, sb.ID, "sh", "-c", "cat /proc/1/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	// Where the daemon may lower scores (CAP_SYS_RESOURCE) the agent runs
	// at -998 and children at 0; elsewhere children are put above it.
	got := strings.Fields(out)
	if len(got) != 2 {
		t.Fatalf("output %q", out)
	}
	agentScore, err1 := strconv.Atoi(got[0])
	childScore, err2 := strconv.Atoi(got[1])
	if err1 != nil || err2 != nil || childScore <= agentScore || childScore < 0 {
		t.Fatalf("oom_score_adj of agent %s and of a grandchild %s: the child must be picked first", got[0], got[1])
	}
	t.Logf("oom_score_adj: agent %d, user process %d", agentScore, childScore)
}

// waitDeath polls until the sandbox is in state error and returns its
// reason and how long after since it got there.
func waitDeath(t *testing.T, d *daemon, id string, since time.Time, within time.Duration) (string, time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		sb, err := d.client.Get(ctxT(t, 10*time.Second), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == api.StateError {
			return sb.ErrorReason, time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox still %s %s after its container died", sb.State, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkDeathReported: the reason is in the state history and the ledger,
// an exec names it, and a start brings the sandbox back with its files.
func checkDeathReported(t *testing.T, d *daemon, id, reason string) {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	h, err := d.client.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if last := h.Changes[len(h.Changes)-1]; last.To != api.StateError || last.Reason != reason {
		t.Fatalf("last state change %+v, want error with %q", last, reason)
	}
	l, err := d.client.Ledger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(l.Entries, func(e api.LedgerEntry) bool { return e.Kind == api.LedgerError && e.Note == reason }) {
		t.Fatalf("ledger has no error entry %q: %+v", reason, l.Entries)
	}
	_, err = d.client.Exec(ctx, id, paddock.ExecOptions{Cmd: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), reason) {
		t.Fatalf("exec on the dead sandbox: %v, want an error naming %q", err, reason)
	}
	if _, err := d.client.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if out, code := execOut(t, d, id, "cat", "/keep"); code != 0 || out != "kept\n" {
		t.Fatalf("after start, /keep = %q (exit %d)", out, code)
	}
}

func writeKeep(t *testing.T, d *daemon, id string) {
	t.Helper()
	var out bytes.Buffer
	res, err := d.client.Exec(ctxT(t, time.Minute), id, paddock.ExecOptions{Cmd: []string{"sh", "-c", "echo kept > /keep"}, User: "root", Stdout: &out, Stderr: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("write /keep: %v %+v %s", err, res, out.String())
	}
}

// memoryBomb fills memory in one process (busybox sort holds its whole
// input line) until the sandbox's memory cgroup runs out.
const memoryBomb = "head -c 400000000 /dev/zero | sort >/dev/null"

// TestSandboxDeathOOM: an agent the OOM killer ends (here root raised its
// score first and put the hog's down, so the agent is picked) makes the sandbox
// error "out of memory" at once, not running until the idle stop; a
// daemon restart still says so; start brings it back with its files.
func TestSandboxDeathOOM(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Resources: api.Resources{MemoryMB: 64}, KeepAlive: true})
	writeKeep(t, d, sb.ID)
	start := time.Now()
	// The hog goes back to the lowest score it may have; the agent to
	// the highest: the kernel now ends the agent first. The shell waits
	// before lowering its own score: the agent raises a new child's score
	// right after starting it, and on a loaded host that can land after
	// the shell's own write, leaving the hog above the floor.
	var out bytes.Buffer
	res, err := d.client.Exec(ctxT(t, 2*time.Minute), sb.ID, paddock.ExecOptions{
		Cmd:  []string{"sh", "-c", "echo 1000 > /proc/1/oom_score_adj && sleep 2 && echo 0 > /proc/self/oom_score_adj && " + memoryBomb},
		User: "root", Stdout: &out, Stderr: &out})
	t.Logf("exec of the bomb: %+v %v %s", res, err, out.String())
	reason, took := waitDeath(t, d, sb.ID, start, 30*time.Second)
	t.Logf("sandbox in error %s after the bomb started: %q", took, reason)
	if reason != "out of memory" {
		t.Fatalf("reason %q, want out of memory", reason)
	}
	// A restart of the daemon keeps what it found.
	d.stop()
	d.start()
	if got, err := d.client.Get(ctxT(t, time.Minute), sb.ID); err != nil || got.State != api.StateError || got.ErrorReason != reason {
		t.Fatalf("after a daemon restart: %+v %v", got, err)
	}
	checkDeathReported(t, d, sb.ID, reason)
}

// TestSandboxDeathSignal: root's `kill -TERM 1` inside ends the agent;
// the sandbox says so within seconds. Then the same while the daemon is
// down: the daemon finds it at its next start (reconcile).
func TestSandboxDeathSignal(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", KeepAlive: true})
	writeKeep(t, d, sb.ID)
	start := time.Now()
	_, _ = d.client.Exec(ctxT(t, time.Minute), sb.ID, paddock.ExecOptions{Cmd: []string{"kill", "-TERM", "1"}, User: "root"})
	reason, took := waitDeath(t, d, sb.ID, start, 10*time.Second)
	t.Logf("sandbox in error %s after kill -TERM 1: %q", took, reason)
	if reason != "agent exited: signal 15" {
		t.Fatalf("reason %q, want agent exited: signal 15", reason)
	}
	checkDeathReported(t, d, sb.ID, reason)

	// Killed while no daemon watches: reconcile tells it.
	d.kill9()
	if out, err := exec.Command("runc", "--root", filepath.Join(d.stateDir, "runtime", "runc", "state"), "kill", sb.ID, "TERM").CombinedOutput(); err != nil {
		t.Fatalf("runc kill: %v %s", err, out)
	}
	time.Sleep(time.Second)
	d.start()
	got, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
	if err != nil || got.State != api.StateError || got.ErrorReason != reason {
		t.Fatalf("after a daemon restart: %+v %v", got, err)
	}
}

// TestSandboxDeathGVisor: a gVisor sandbox whose sentry is killed from the
// host says so.
func TestSandboxDeathGVisor(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Runtime: "gvisor", KeepAlive: true})
	writeKeep(t, d, sb.ID)
	out, err := exec.Command(runscBin(), "--root", filepath.Join(d.stateDir, "runtime", "runsc", "state"), "state", sb.ID).Output()
	if err != nil {
		t.Fatalf("runsc state: %v", err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("runsc state %s: %v", out, err)
	}
	start := time.Now()
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	reason, took := waitDeath(t, d, sb.ID, start, 10*time.Second)
	t.Logf("sandbox in error %s after its sentry was killed: %q", took, reason)
	if !strings.HasPrefix(reason, "gVisor sentry killed") {
		t.Fatalf("reason %q, want gVisor sentry killed", reason)
	}
	checkDeathReported(t, d, sb.ID, reason)
}

// TestExecOOMKilled: a memory hog run as the default user is what the OOM
// killer ends, not the agent: the sandbox keeps running, and the hog's
// end event says it was killed for memory.
func TestExecOOMKilled(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox", Resources: api.Resources{MemoryMB: 64}, KeepAlive: true})
	res, err := d.client.Exec(ctxT(t, 2*time.Minute), sb.ID, paddock.ExecOptions{Cmd: []string{"sort", "/dev/zero"}})
	if err != nil {
		t.Fatalf("exec of the hog: %v", err)
	}
	if res.Signal != "SIGKILL" || !res.OOMKilled {
		t.Fatalf("hog ended %+v, want SIGKILL with oom_killed", res)
	}
	if out, code := execOut(t, d, sb.ID, "echo", "alive"); code != 0 || out != "alive\n" {
		t.Fatalf("after the hog: %q exit %d", out, code)
	}
	got, err := d.client.Get(ctxT(t, time.Minute), sb.ID)
	if err != nil || got.State != api.StateRunning {
		t.Fatalf("sandbox after its hog was killed: %+v %v", got, err)
	}
}
