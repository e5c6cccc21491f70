package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestSessions drives shell sessions through the CLI and SDK on runc and
// gVisor: state that persists, a command that never ends (killed, the
// session still works), a shell wedged in a builtin (replaced, said so),
// 100 queued commands, and a teardown that spares background processes.
func TestSessions(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	for _, rt := range []string{api.RuntimeRunc, api.RuntimeGVisor} {
		t.Run(rt, func(t *testing.T) {
			if rt == api.RuntimeGVisor {
				requireGVisor(t)
			}
			name := uniqueName("sess")
			d.must("create", "--name", name, "--runtime", rt)
			if out := d.must("session", "create", name, "--name", "s1", "--cwd", "/home/user", "--env", "A=1"); out != "s1\n" {
				t.Fatalf("session create printed %q", out)
			}
			steps := []struct{ cmd, want string }{
				{"cd /tmp", ""},
				{"pwd", "/tmp\n"},
				{"export B=2", ""},
				{"echo $A$B", "12\n"},
				{"greet() { echo hello-$1; }", ""},
				{"greet you", "hello-you\n"},
			}
			for _, s := range steps {
				if out := d.must("exec", name, "--session", "s1", "--", s.cmd); out != s.want {
					t.Fatalf("%q printed %q, want %q", s.cmd, out, s.want)
				}
			}
			// A command that never ends: killed at its timeout (exit 124, as
			// for plain exec), then the session answers with its state intact.
			_, errOut, code := d.run("exec", name, "--session", "s1", "--timeout", "1s", "--", "sleep 1000; echo never")
			if code != 124 || !strings.Contains(errOut, "timed out") {
				t.Fatalf("never-ending command: exit %d, stderr %q", code, errOut)
			}
			if out := d.must("exec", name, "--session", "s1", "--", "echo $PWD $A$B; greet again"); out != "/tmp 12\nhello-again\n" {
				t.Fatalf("after the timeout: %q", out)
			}
			// A shell stuck in a builtin cannot be interrupted: it is replaced
			// and the end event says so; the session's own env comes back.
			res, err := d.client.Exec(ctxT(t, time.Minute), name, paddock.ExecOptions{
				Session: "s1", Cmd: []string{"while :; do :; done"}, Timeout: time.Second})
			if err != nil || !res.TimedOut || !res.SessionRestarted {
				t.Fatalf("builtin loop: %+v %v", res, err)
			}
			if out := d.must("exec", name, "--session", "s1", "--", "echo $A-$B-$PWD"); out != "1--/home/user\n" {
				t.Fatalf("after the restart: %q", out)
			}

			// Teardown spares background processes but ends the session's jobs.
			d.must("proc", "start", name, "--id", "keeper", "--", "sleep", "1000")
			d.must("session", "create", name, "--name", "doomed")
			job := strings.TrimSpace(d.must("exec", name, "--session", "doomed", "--", "sleep 999 >/dev/null 2>&1 & echo $!"))
			d.must("session", "rm", name, "doomed")
			if out := d.must("session", "ls", name); strings.Contains(out, "doomed") || !strings.Contains(out, "s1") {
				t.Fatalf("session ls after rm:\n%s", out)
			}
			if out := d.must("proc", "inspect", name, "keeper"); !strings.Contains(out, `"status": "running"`) {
				t.Fatalf("background process after a session teardown:\n%s", out)
			}
			gone := false
			for range 100 {
				if _, code := execOut(t, d, name, "kill", "-0", job); code != 0 {
					gone = true
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !gone {
				t.Fatalf("the deleted session's job %s is still alive", job)
			}
			d.must("proc", "kill", name, "keeper", "--grace", "2s")
		})
	}
}

// TestSessionQueue sends 100 commands at once to one session: they run one
// at a time (each sees a different counter) and all of them finish.
func TestSessionQueue(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	ctx := ctxT(t, 3*time.Minute)
	if _, err := d.client.CreateSession(ctx, sb.ID, api.CreateSessionRequest{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Exec(ctx, sb.ID, paddock.ExecOptions{Session: "q", Cmd: []string{"n=0"}}); err != nil {
		t.Fatal(err)
	}
	const n = 100
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			res, err := d.client.Exec(ctx, sb.ID, paddock.ExecOptions{Session: "q", Cmd: []string{"n=$((n+1)); echo $n"}, Stdout: &out})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			outs[i], errs[i] = strings.TrimSpace(out.String()), err
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("command %d: %v", i, errs[i])
		}
		seen[outs[i]] = true
	}
	for i := 1; i <= n; i++ {
		if !seen[strconv.Itoa(i)] {
			t.Fatalf("no command saw counter %d (commands overlapped?): %v", i, outs)
		}
	}
	list, err := d.client.ListSessions(ctx, sb.ID)
	if err != nil || len(list) != 1 || list[0].Commands != n+1 || list[0].Busy {
		t.Fatalf("sessions after the queue: %+v %v", list, err)
	}
	// Sessions live in the sandbox's memory: a stop ends them, and the next
	// call starts the sandbox again with none.
	if _, err := d.client.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := d.client.ListSessions(ctx, sb.ID); err != nil || len(list) != 0 {
		t.Fatalf("sessions after a stop: %+v %v", list, err)
	}
}

// TestBackgroundProcesses: a dev server is started, waited on, read and
// killed; waits fail fast with the output of a process that dies first; a
// followed log never ends while the process runs.
func TestBackgroundProcesses(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	name := uniqueName("bg")
	d.must("create", "--name", name)

	if out := d.must("proc", "start", name, "--id", "web", "--", "python3", "-u", "-m", "http.server", "8000"); out != "web\n" {
		t.Fatalf("proc start printed %q", out)
	}
	d.must("proc", "wait-port", name, "web", "8000", "--http", "/", "--status", "200", "--timeout", "60s")
	if out := d.must("proc", "wait-log", name, "web", `"GET / HTTP/1\.1" 200`, "--timeout", "30s"); !strings.Contains(out, "GET / HTTP/1.1") {
		t.Fatalf("wait-log printed %q", out)
	}
	if out := d.must("proc", "logs", name, "web", "--stdout"); !strings.Contains(out, "Serving HTTP on") {
		t.Fatalf("logs: %q", out)
	}
	if out := d.must("proc", "ls", name); !regexp.MustCompile(`(?m)^web\s+\d+\s+running`).MatchString(out) {
		t.Fatalf("proc ls:\n%s", out)
	}
	if out := d.must("proc", "kill", name, "web"); !strings.Contains(out, "killed (SIGTERM)") {
		t.Fatalf("kill: %q", out)
	}

	// Dies before its port opens: the wait fails at once (not after its
	// ten minutes) and quotes what the process said.
	d.must("proc", "start", name, "--id", "crash", "--", "sh", "-c", "echo fatal-config-error >&2; exit 2")
	_, errOut, code := d.run("proc", "wait-port", name, "crash", "9000", "--timeout", "10m")
	if code == 0 || !strings.Contains(errOut, "fatal-config-error") || !strings.Contains(errOut, "exited with code 2") {
		t.Fatalf("wait-port on a dead process: exit %d, %q", code, errOut)
	}
	_, errOut, code = d.run("proc", "wait-log", name, "crash", "never-printed", "--timeout", "10m")
	if code == 0 || !strings.Contains(errOut, "fatal-config-error") {
		t.Fatalf("wait-log on a dead process: exit %d, %q", code, errOut)
	}
	if _, _, code := d.run("proc", "wait", name, "crash"); code != 2 {
		t.Fatalf("proc wait exit %d, want the process's 2", code)
	}

	// Closing its output is not ending: a follower waits for the real end.
	d.must("proc", "start", name, "--id", "quiet", "--", "sh", "-c", "echo started; exec >/dev/null 2>&1; sleep 2; exit 5")
	ctx := ctxT(t, 2*time.Minute)
	var out bytes.Buffer
	res, err := d.client.ProcessLogs(ctx, name, "quiet", paddock.LogsOptions{Follow: true, Stdout: &out})
	if err != nil || res.Process == nil || res.Process.Status != api.ProcessExited || res.Process.ExitCode == nil || *res.Process.ExitCode != 5 {
		t.Fatalf("follow: %+v %v", res, err)
	}
	if out.String() != "started\n" {
		t.Fatalf("followed output %q", out.String())
	}
	if p, err := d.client.GetProcess(ctx, name, "quiet"); err != nil || p.Status != api.ProcessExited || p.EndedAt == nil {
		t.Fatalf("after the follow ended: %+v %v", p, err)
	}
	// Resuming from an offset returns only what came after it.
	res, err = d.client.ProcessLogs(ctx, name, "quiet", paddock.LogsOptions{Stream: api.LogStdout, Offset: 4, Stdout: &out})
	if err != nil || res.StdoutOffset != 8 || !strings.HasSuffix(out.String(), "started\nted\n") {
		t.Fatalf("logs from offset 4: %+v %q %v", res, out.String(), err)
	}
}

// TestProcessFloodsOutput: a process prints 1 GiB without a newline. The
// ring keeps the last MiB, says how much was dropped, and the agent's
// memory stays flat.
func TestProcessFloodsOutput(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	ctx := ctxT(t, 5*time.Minute)
	const total = 1 << 30
	if _, err := d.client.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "flood",
		Cmd: []string{"sh", "-c", "head -c 1073741824 /dev/zero | tr '\\0' x"}}); err != nil {
		t.Fatal(err)
	}
	w, err := d.client.WaitProcess(ctx, sb.ID, "flood", api.WaitProcessRequest{For: api.WaitExit, Timeout: "4m"})
	if err != nil {
		t.Fatal(err)
	}
	st := w.Process.Stdout
	if w.Process.Status != api.ProcessExited || st.End != total || !st.Truncated || st.Capacity != api.DefaultLogBufferBytes || st.Start != total-st.Capacity {
		t.Fatalf("after 1 GiB: %+v", w.Process)
	}
	var out floodWriter
	res, err := d.client.ProcessLogs(ctx, sb.ID, "flood", paddock.LogsOptions{Stdout: &out})
	if err != nil || out.n != api.DefaultLogBufferBytes || out.other || res.Dropped != total-api.DefaultLogBufferBytes {
		t.Fatalf("logs: %d bytes (only x: %v), dropped %d, %v", out.n, !out.other, res.Dropped, err)
	}
	status, code := execOut(t, d, sb.ID, "cat", "/proc/1/status")
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindStringSubmatch(status)
	if code != 0 || m == nil {
		t.Fatalf("agent status: %s", status)
	}
	// Far below the 1 GiB printed: the agent never held the output.
	if kb, _ := strconv.Atoi(m[1]); kb > 150<<10 {
		t.Fatalf("agent peak memory %d kB after 1 GiB of output", kb)
	}
}

type floodWriter struct {
	n     int64
	other bool
}

func (c *floodWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if len(bytes.Trim(p, "x")) > 0 {
		c.other = true
	}
	return len(p), nil
}

// TestSessionAndProcessBadInput: each malformed request gets a clear,
// typed error.
func TestSessionAndProcessBadInput(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	sb := create(t, d, api.CreateSandboxRequest{Image: "busybox"})
	ctx := ctxT(t, 2*time.Minute)
	c := d.client
	if _, err := c.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "p", Cmd: []string{"sleep", "100"}}); err != nil {
		t.Fatal(err)
	}
	check := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	_, err := c.CreateSession(ctx, sb.ID, api.CreateSessionRequest{Name: "../x"})
	check("bad session name", err, paddock.ErrInvalidArgument)
	_, err = c.CreateSession(ctx, sb.ID, api.CreateSessionRequest{Name: "s", Env: map[string]string{"A-B": "1"}})
	check("bad session env", err, paddock.ErrInvalidArgument)
	_, err = c.CreateSession(ctx, sb.ID, api.CreateSessionRequest{Name: "s", User: "nobody-here"})
	check("unknown session user", err, paddock.ErrNotFound)
	_, err = c.Exec(ctx, sb.ID, paddock.ExecOptions{Session: "missing", Cmd: []string{"true"}})
	check("exec in a missing session", err, paddock.ErrNotFound)
	_, err = c.Exec(ctx, sb.ID, paddock.ExecOptions{Session: api.DefaultSession, Cmd: []string{"true"}, Cwd: "/tmp"})
	check("cwd with a session", err, paddock.ErrInvalidArgument)
	check("delete a missing session", c.DeleteSession(ctx, sb.ID, "missing"), paddock.ErrNotFound)
	_, err = c.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "p", Cmd: []string{"true"}})
	check("id of a running process", err, paddock.ErrConflict)
	_, err = c.StartProcess(ctx, sb.ID, api.StartProcessRequest{ID: "9lives", Cmd: []string{"true"}})
	check("bad process id", err, paddock.ErrInvalidArgument)
	_, err = c.StartProcess(ctx, sb.ID, api.StartProcessRequest{Cmd: []string{"true"}, LogBufferBytes: 1})
	check("tiny log buffer", err, paddock.ErrInvalidArgument)
	_, err = c.StartProcess(ctx, sb.ID, api.StartProcessRequest{Cmd: []string{"no-such-command"}})
	check("missing command", err, paddock.ErrNotFound)
	_, err = c.GetProcess(ctx, sb.ID, "nope")
	check("missing process", err, paddock.ErrNotFound)
	_, err = c.KillProcess(ctx, sb.ID, "p", api.KillProcessRequest{Signal: "SIGNOPE"})
	check("unknown signal", err, paddock.ErrInvalidArgument)
	_, err = c.WaitProcess(ctx, sb.ID, "p", api.WaitProcessRequest{For: "lunch"})
	check("unknown wait", err, paddock.ErrInvalidArgument)
	_, err = c.WaitProcess(ctx, sb.ID, "p", api.WaitProcessRequest{For: api.WaitPort, Port: 70000})
	check("bad port", err, paddock.ErrInvalidArgument)
	_, err = c.WaitProcess(ctx, sb.ID, "p", api.WaitProcessRequest{For: api.WaitLog, Pattern: "(unclosed"})
	check("bad pattern", err, paddock.ErrInvalidArgument)
	_, err = c.WaitProcess(ctx, sb.ID, "p", api.WaitProcessRequest{For: api.WaitExit, Timeout: "300ms"})
	check("wait timeout", err, paddock.ErrDeadlineExceeded)
	_, err = c.ProcessLogs(ctx, sb.ID, "p", paddock.LogsOptions{Stream: "stdin"})
	check("bad stream", err, paddock.ErrInvalidArgument)
}
