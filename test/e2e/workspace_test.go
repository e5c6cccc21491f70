package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/workspace/wjs"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// TestWorkspaceThroughTheCLI works in a workspace as a user would: files
// made, edited and searched by the shell executor, each change a version,
// history, diff and rollback, exit codes passed through, a command the
// shell cannot run refused with the reason, and everything still there
// after the daemon is killed and started again.
func TestWorkspaceThroughTheCLI(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	id := strings.TrimSpace(d.must("workspace", "create", "proj"))
	if id == "" {
		t.Fatal("workspace create printed no id")
	}
	d.must("run", "proj", "--script", "--", `mkdir -p src && printf 'alpha\nbeta\ngamma\n' > src/words.txt && echo 'TODO: one' > notes.md`)
	d.must("run", "proj", "--", "sed", "-i", "s/beta/BETA/", "src/words.txt")
	if out := d.must("run", "proj", "--script", "--", "grep -rn BETA . | wc -l"); strings.TrimSpace(out) != "1" {
		t.Fatalf("grep -rn BETA | wc -l printed %q", out)
	}
	if out := d.must("run", "proj", "--", "cat", "src/words.txt"); out != "alpha\nBETA\ngamma\n" {
		t.Fatalf("after sed -i: %q", out)
	}
	// Exit codes are the command's; a failed command still lands what it
	// changed before failing.
	if _, _, code := d.run("run", "proj", "--script", "--", "echo partial > p.txt; grep -q nothing notes.md"); code != 1 {
		t.Fatalf("grep without a match exited %d through paddock run, want 1", code)
	}
	_, errOut, code := d.run("run", "proj", "--executor", "shell", "--", "python3", "-c", "print(1)")
	if code != 127 || !strings.Contains(errOut, "command not found") {
		t.Fatalf("python3 under shell: exit %d, %q", code, errOut)
	}
	log := d.must("workspace", "log", "proj")
	for _, want := range []string{"sed -i", "mkdir -p src", "grep -q nothing"} {
		if !strings.Contains(log, want) {
			t.Fatalf("workspace log lacks %q:\n%s", want, log)
		}
	}
	var hist api.WorkspaceHistory
	if err := json.Unmarshal([]byte(d.must("--json", "workspace", "log", "proj")), &hist); err != nil || len(hist.Versions) != 3 {
		t.Fatalf("history: %v, %+v", err, hist)
	}
	if diff := d.must("workspace", "diff", "proj", "1", "2"); diff != "~ src/words.txt\n" {
		t.Fatalf("diff 1 2: %q", diff)
	}
	d.must("workspace", "rollback", "proj", "1")
	if out := d.must("run", "proj", "--", "cat", "src/words.txt"); out != "alpha\nbeta\ngamma\n" {
		t.Fatalf("after rollback to 1: %q", out)
	}
	if _, _, code := d.run("run", "proj", "--", "test", "-e", "p.txt"); code != 1 {
		t.Fatal("p.txt survived the rollback to version 1")
	}

	// The canonical copy is the daemon's: a kill -9 loses nothing landed.
	d.kill9()
	d.start()
	if out := d.must("run", "proj", "--", "cat", "notes.md"); out != "TODO: one\n" {
		t.Fatalf("after a restart notes.md is %q", out)
	}
	var ws api.Workspace
	if err := json.Unmarshal([]byte(d.must("workspace", "inspect", "proj")), &ws); err != nil || ws.Version != 4 || ws.Files != 3 {
		t.Fatalf("inspect after restart: %v %+v", err, ws)
	}
	// Export and import: the copy has the same files and history.
	file := d.stateDir + "/proj.tar"
	d.must("workspace", "export", "proj", "-o", file)
	d.must("workspace", "import", file, "--name", "proj2")
	if out := d.must("run", "proj2", "--", "cat", "notes.md", "src/words.txt"); out != "TODO: one\nalpha\nbeta\ngamma\n" {
		t.Fatalf("the imported copy reads %q", out)
	}
	if err := json.Unmarshal([]byte(d.must("--json", "workspace", "log", "proj2")), &hist); err != nil || len(hist.Versions) != 4 {
		t.Fatalf("the imported history: %v, %+v", err, hist)
	}
	if _, errOut, code := d.run("workspace", "import", file, "--name", "proj2"); code == 0 || !strings.Contains(errOut, "already have") {
		t.Fatalf("a second import under a taken name: exit %d, %q", code, errOut)
	}
	d.must("workspace", "rm", "proj2")
	d.must("workspace", "rm", "proj")
	if _, _, code := d.run("workspace", "inspect", id); code == 0 {
		t.Fatal("the workspace is still there after rm")
	}
}

// TestWorkspaceConcurrentCommands runs commands at once on one
// workspace: commands on different files both land, and of two that
// write the same file after reading the same version, one lands and the
// other is refused whole.
func TestWorkspaceConcurrentCommands(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 2*time.Minute)
	if _, err := d.client.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "race"}); err != nil {
		t.Fatal(err)
	}
	run := func(script string) (*api.WorkspaceRunResult, error) {
		return d.client.RunInWorkspace(ctx, "race", api.WorkspaceRunRequest{Script: script})
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, script := range []string{
		"sleep 0.5; echo a > a.txt",
		"sleep 0.5; echo b > b.txt",
		"sleep 0.5; echo one > same.txt; echo one-extra > one.txt",
		"sleep 0.5; echo two > same.txt; echo two-extra > two.txt",
	} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = run(script) }()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("commands on different files: %v, %v", errs[0], errs[1])
	}
	lost := 0
	for _, err := range errs[2:] {
		if errors.Is(err, paddock.ErrConflict) {
			lost++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if lost != 1 {
		t.Fatalf("of two writers of same.txt %d were refused, want 1: %v", lost, errs[2:])
	}
	res, err := run("cat a.txt b.txt same.txt; ls")
	if err != nil {
		t.Fatal(err)
	}
	// The refused command left nothing: only the winner's extra file.
	winner := strings.Fields(res.Stdout)[2]
	if !strings.Contains(res.Stdout, winner+".txt") {
		t.Fatalf("workspace after the race:\n%s", res.Stdout)
	}
	loser := map[string]string{"one": "two", "two": "one"}[winner]
	if strings.Contains(res.Stdout, loser+".txt") {
		t.Fatalf("part of the refused command landed:\n%s", res.Stdout)
	}
}

// TestWorkspaceTenancy: keys of scope own see and touch only their own
// workspaces, by id or name, with the same not-found as for nothing;
// names are per owner; a key of scope all sees them all.
func TestWorkspaceTenancy(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 2*time.Minute)
	a := newTenant(t, d, "ws-a", api.KeyScopeOwn)
	b := newTenant(t, d, "ws-b", api.KeyScopeOwn)
	all := newTenant(t, d, "ws-ops", api.KeyScopeAll)
	wa, err := a.sdk.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.sdk.RunInWorkspace(ctx, "dev", api.WorkspaceRunRequest{Script: "echo secret-of-a > s"}); err != nil {
		t.Fatal(err)
	}
	// b may have its own dev.
	if _, err := b.sdk.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "dev"}); err != nil {
		t.Fatalf("b's own dev: %v", err)
	}
	if _, err := a.sdk.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "dev"}); !errors.Is(err, paddock.ErrConflict) {
		t.Fatalf("a's second dev: %v", err)
	}
	if res, err := b.sdk.RunInWorkspace(ctx, "dev", api.WorkspaceRunRequest{Script: "cat s"}); err == nil && strings.Contains(res.Stdout, "secret") {
		t.Fatal("b's dev shows a's file")
	}
	list, _ := b.sdk.ListWorkspaces(ctx)
	if len(list) != 1 || list[0].ID == wa.ID {
		t.Fatalf("b lists %+v", list)
	}
	for _, r := range []route{
		{"GET", "/v1/workspaces/{ref}", ""},
		{"DELETE", "/v1/workspaces/{ref}", ""},
		{"POST", "/v1/workspaces/{ref}/run", `{"script":"cat s"}`},
		{"GET", "/v1/workspaces/{ref}/versions", ""},
		{"GET", "/v1/workspaces/{ref}/diff", ""},
		{"POST", "/v1/workspaces/{ref}/rollback", `{"version":0}`},
		{"GET", "/v1/workspaces/{ref}/export", ""},
		{"GET", "/v1/workspaces/{ref}/files?path=s", ""},
		{"PUT", "/v1/workspaces/{ref}/files?path=s", "overwritten"},
		{"GET", "/v1/workspaces/{ref}/ledger", ""},
		{"POST", "/v1/workspaces/{ref}/prune", `{"before":1}`},
	} {
		p, body := r.fill(wa.ID, "", "")
		theirs := b.raw.do(r.method, p, body)
		p, body = r.fill("nosuchworkspace", "", "")
		none := b.raw.do(r.method, p, body)
		if theirs.status != http.StatusNotFound || none.status != http.StatusNotFound || theirs.err.Code != none.err.Code {
			t.Errorf("%s %s: another's %d %q, nothing %d %q", r.method, r.path, theirs.status, theirs.err.Message, none.status, none.err.Message)
		}
	}
	if list, _ := all.sdk.ListWorkspaces(ctx); len(list) != 2 {
		t.Fatalf("the all key lists %d workspaces, want 2", len(list))
	}
	if res, err := all.sdk.RunInWorkspace(ctx, wa.ID, api.WorkspaceRunRequest{Script: "cat s"}); err != nil || res.Stdout != "secret-of-a\n" {
		t.Fatalf("the all key reading a's workspace by id: %v %+v", err, res)
	}
	if got, _ := a.sdk.GetWorkspace(ctx, "dev"); got == nil || got.Version != 1 {
		t.Fatalf("a's dev after b's attempts: %+v", got)
	}
	// One key keeps at most 100 workspaces; another key is not counted.
	for i := 1; i < 100; i++ {
		if _, err := b.sdk.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: fmt.Sprintf("w%d", i)}); err != nil {
			t.Fatalf("b's workspace %d: %v", i+1, err)
		}
	}
	if _, err := b.sdk.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "one-too-many"}); !errors.Is(err, paddock.ErrResourceExhausted) {
		t.Fatalf("b's 101st workspace: %v", err)
	}
	if _, err := a.sdk.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "still-fine"}); err != nil {
		t.Fatalf("a's second workspace beside b's hundred: %v", err)
	}
}

// TestWorkspaceContainerExecutor: auto sends a command that needs a
// program the shell lacks to a sandbox holding a copy of the workspace;
// what it changes lands as a version the shell executor then sees, and
// what the shell changes next is in the container's copy for the command
// after. The sandbox is the owner's, labelled, and goes with the
// workspace.
func TestWorkspaceContainerExecutor(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	if _, err := d.client.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "mixed"}); err != nil {
		t.Fatal(err)
	}
	run := func(script, executor string) *api.WorkspaceRunResult {
		t.Helper()
		res, err := d.client.RunInWorkspace(ctx, "mixed", api.WorkspaceRunRequest{Script: script, Executor: executor})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res
	}
	run("mkdir data && echo 1 > data/n", "")
	res := run(`python3 -c "import pathlib; p = pathlib.Path('data/n'); p.write_text(str(int(p.read_text()) + 41) + chr(10))" && ln -s /etc/passwd data/link`, "")
	if res.Executor != api.ExecutorContainer || !strings.Contains(res.Reason, "python3") || res.ExitCode != 0 {
		t.Fatalf("python3 under auto: %+v", res)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != "data/n" || !strings.Contains(res.Stderr, "data/link was not kept") {
		t.Fatalf("the container's changes: %+v, stderr %q", res.Changes, res.Stderr)
	}
	if got := run("cat data/n", "").Stdout; got != "42\n" {
		t.Fatalf("the shell reads %q after the container's change", got)
	}
	run("echo from-shell > data/s", api.ExecutorShell)
	if got := run("cat data/s && python3 -c 'print(7)'", "").Stdout; got != "from-shell\n7\n" {
		t.Fatalf("the container reads %q after the shell's change", got)
	}
	// A failing command's changes land too; a timed-out one's do not.
	if res := run("echo half > half.txt; python3 -c 'raise SystemExit(3)'", ""); res.ExitCode != 3 || res.Version == res.BaseVersion {
		t.Fatalf("failing command: %+v", res)
	}
	res, err := d.client.RunInWorkspace(ctx, "mixed", api.WorkspaceRunRequest{Script: "echo late > late.txt; python3 -c 'import time; time.sleep(30)'", TimeoutMs: 1500})
	if err != nil || res.Stopped != "timeout" || res.Version != res.BaseVersion {
		t.Fatalf("timed-out command: %v %+v", err, res)
	}
	if _, _, code := d.run("run", "mixed", "--", "test", "-e", "late.txt"); code != 1 {
		t.Fatal("a timed-out command's file landed")
	}
	var boxes []string
	all, err := d.client.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		if _, ok := sb.Labels["paddock.workspace"]; ok {
			boxes = append(boxes, sb.ID)
		}
	}
	if len(boxes) != 1 {
		t.Fatalf("%d executor sandboxes, want 1", len(boxes))
	}

	// The executor's sandbox dies mid-command: the command fails, nothing
	// of it lands, and the next container command gets a new sandbox.
	ws, _ := d.client.GetWorkspace(ctx, "mixed")
	failed := make(chan error, 1)
	go func() {
		_, err := d.client.RunInWorkspace(ctx, "mixed", api.WorkspaceRunRequest{Script: "echo doomed > doomed.txt; python3 -c 'import time; time.sleep(60)'"})
		failed <- err
	}()
	time.Sleep(2 * time.Second)
	if err := d.client.Delete(ctx, boxes[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("a command whose sandbox was destroyed under it succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("a command whose sandbox was destroyed under it did not end")
	}
	if after, _ := d.client.GetWorkspace(ctx, "mixed"); after.Version != ws.Version {
		t.Fatalf("version %d after the failed command, was %d", after.Version, ws.Version)
	}
	if got := run("ls; python3 -c 'print(1)'", api.ExecutorContainer).Stdout; strings.Contains(got, "doomed") || !strings.HasSuffix(got, "1\n") {
		t.Fatalf("after the executor's death: %q", got)
	}
	boxes = boxes[:0]
	all, _ = d.client.List(ctx, nil)
	for _, sb := range all {
		if _, ok := sb.Labels["paddock.workspace"]; ok {
			boxes = append(boxes, sb.ID)
		}
	}
	if len(boxes) != 1 {
		t.Fatalf("%d executor sandboxes after the re-attach, want 1", len(boxes))
	}
	if err := d.client.DeleteWorkspace(ctx, "mixed"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Get(ctx, boxes[0]); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("the executor sandbox after the workspace's removal: %v", err)
	}
}

// TestWorkspaceJSExecutor: JavaScript through the CLI, as inline source
// and as a program file of the workspace, sharing files with the shell;
// the engine runs in a child process of the daemon as nobody, which a
// timeout ends, leaving nothing behind.
func TestWorkspaceJSExecutor(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	d.must("workspace", "create", "data")
	d.must("run", "data", "--script", "--", `mkdir rows && for i in 1 2 3; do echo "{\"n\": $i}" > rows/$i.json; done`)
	src := `const fs = require('fs'), path = require('path');
let sum = 0;
for (const f of fs.readdirSync('rows')) sum += JSON.parse(fs.readFileSync(path.join('rows', f), 'utf8')).n;
fs.writeFileSync('sum.txt', sum + '\n');
console.log('sum', sum);`
	if out := d.must("run", "data", "--executor", "js", "--script", "--", src); out != "sum 6\n" {
		t.Fatalf("inline program printed %q", out)
	}
	if out := d.must("run", "data", "--", "cat", "sum.txt"); out != "6\n" {
		t.Fatalf("the shell reads %q", out)
	}
	d.must("run", "data", "--script", "--", `echo 'console.log(process.argv.slice(2).join(" ")); process.exit(Number(process.argv[2]))' > tools.js`)
	if out, _, code := d.run("run", "data", "--executor", "js", "--", "tools.js", "4", "more"); code != 4 || out != "4 more\n" {
		t.Fatalf("a program file: exit %d, %q", code, out)
	}
	if _, errOut, code := d.run("run", "data", "--executor", "js", "--script", "--", "require('fs').readFileSync('/etc/passwd')"); code != 1 || !strings.Contains(errOut, "EACCES") {
		t.Fatalf("a host file: exit %d, %q", code, errOut)
	}

	// While a program runs, its engine is a child of the daemon running
	// as nobody; the timeout ends it.
	done := make(chan error, 1)
	go func() {
		_, _, code := d.run("run", "data", "--executor", "js", "--timeout", "4s", "--script", "--", "for (;;) {}")
		if code != 124 {
			done <- fmt.Errorf("a program past its timeout exited %d, want 124", code)
		}
		done <- nil
	}()
	var uids []string
	deadline := time.Now().Add(3 * time.Second)
	for len(uids) == 0 && time.Now().Before(deadline) {
		uids = jsChildrenOf(t, d.cmd.Process.Pid)
		time.Sleep(50 * time.Millisecond)
	}
	if len(uids) != 1 || uids[0] != "65534" {
		t.Fatalf("the engine's processes run as %v, want one as 65534", uids)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if left := jsChildrenOf(t, d.cmd.Process.Pid); len(left) != 0 {
		t.Fatalf("engine processes left after the timeout: %v", left)
	}
	var hist api.WorkspaceHistory
	if err := json.Unmarshal([]byte(d.must("--json", "workspace", "log", "data")), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist.Versions) != 3 || hist.Versions[1].Executor != api.ExecutorJS {
		t.Fatalf("history: %+v", hist.Versions)
	}
}

// jsChildrenOf lists the real uids of the JavaScript engine processes
// whose parent is pid.
func jsChildrenOf(t *testing.T, pid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), wjs.ChildArg) {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil || !strings.Contains(string(status), fmt.Sprintf("\nPPid:\t%d\n", pid)) {
			continue
		}
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
				uids = append(uids, f[1])
			}
		}
	}
	return uids
}

// TestWorkspaceContainerCopyFollows: the container executor's copy is
// brought up to date by its differences and read back by what changed
// since the last read-back, and neither loses a change: a file moved over
// another, a rewrite of the same size and modification time (which only
// its change time betrays), the shell's additions, removals and mode
// changes, and a symlink the workspace cannot hold (gone from the copy
// before the next command).
func TestWorkspaceContainerCopyFollows(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 5*time.Minute)
	if _, err := d.client.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: "follow"}); err != nil {
		t.Fatal(err)
	}
	run := func(script, executor string) *api.WorkspaceRunResult {
		t.Helper()
		res, err := d.client.RunInWorkspace(ctx, "follow", api.WorkspaceRunRequest{Script: script, Executor: executor})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("%s on %s exited %d: %s", script, res.Executor, res.ExitCode, res.Stderr)
		}
		return res
	}
	const ctr, sh = api.ExecutorContainer, api.ExecutorShell
	run("echo A > a && echo B > b && mkdir -p d/e && echo x > d/e/x", sh)
	run("cat a b", ctr) // attach: copied in whole, read back whole
	run("mv a b", ctr)
	if got := run("cat b; test -e a || echo gone", sh).Stdout; got != "A\ngone\n" {
		t.Fatalf("after mv a b in the container, the shell reads %q", got)
	}
	run("printf abcd > same && touch -d '2001-01-01 00:00:00' same", ctr)
	run("printf wxyz > same && touch -d '2001-01-01 00:00:00' same", ctr)
	if got := run("cat same", sh).Stdout; got != "wxyz" {
		t.Fatalf("a rewrite of the same size and time read back as %q", got)
	}
	run("echo C > c && rm -r d && chmod 700 b", sh)
	if got := run("cat c; test -e d || echo no-d; stat -c %a b", ctr).Stdout; got != "C\nno-d\n700\n" {
		t.Fatalf("the container after the shell's changes reads %q", got)
	}
	res := run("ln -s /etc/passwd link", ctr)
	if !strings.Contains(res.Stderr, "link was not kept") {
		t.Fatalf("a symlink: %+v", res)
	}
	if got := run("test -e link || test -L link || echo no-link", ctr).Stdout; got != "no-link\n" {
		t.Fatalf("the symlink stayed in the copy: %q", got)
	}
	// A shell command lands while a container command runs: the version
	// the container's changes make holds the shell's file too, which the
	// copy does not, so the next container command must get it.
	slow := make(chan error, 1)
	go func() {
		_, err := d.client.RunInWorkspace(ctx, "follow", api.WorkspaceRunRequest{Script: "sleep 2 && echo c2 > c2", Executor: ctr})
		slow <- err
	}()
	time.Sleep(500 * time.Millisecond)
	run("echo s > s", sh)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if got := run("cat s c2", ctr).Stdout; got != "s\nc2\n" {
		t.Fatalf("after a shell command landed beside a container command, the container reads %q", got)
	}
	// The copy matches the head version file for file.
	want := run("find . | sort && cat b c same", sh).Stdout
	if got := run("find . | sort && cat b c same", ctr).Stdout; got != want {
		t.Fatalf("the container's copy:\n%s\nthe workspace:\n%s", got, want)
	}
}
