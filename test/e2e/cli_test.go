package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
)

// TestCommandGranularity is the first lines: do creates, runs and
// destroys, and the exit code comes back.
func TestCommandGranularity(t *testing.T) {
	d := startDaemon(t, daemonOpts{})

	out := d.must("do", "--", "python3", "-c", "print(6*7)")
	if out != "42\n" {
		t.Fatalf("do python3: got %q, want 42", out)
	}
	_, _, code := d.run("do", "--image", "busybox", "--", "sh", "-c", "exit 3")
	if code != 3 {
		t.Fatalf("exit code: got %d, want 3", code)
	}
	// Nothing is left behind by do.
	if out := d.must("ls", "--json"); strings.Contains(out, `"id"`) {
		t.Fatalf("do left a sandbox behind: %s", out)
	}
}

func TestDoInGVisor(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	out := d.must("do", "--runtime", "gvisor", "--", "uname", "-r")
	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) == "" || strings.TrimSpace(out) == strings.TrimSpace(string(host)) {
		t.Fatalf("uname -r in gVisor = %q, host = %q: expected gVisor's own kernel version", out, host)
	}
}

// TestWorkspace walks a named sandbox through exec, copies both ways,
// listing, inspect, stop (files kept), start and rm.
func TestWorkspace(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	name := uniqueName("dev")
	id := strings.TrimSpace(d.must("create", "--name", name))
	if id == "" {
		t.Fatal("create printed no id")
	}
	d.must("exec", name, "--", "sh", "-c", "echo hi > /home/user/a.txt")

	dir := t.TempDir()
	local := filepath.Join(dir, "a.txt")
	d.must("cp", name+":/home/user/a.txt", local)
	if b, err := os.ReadFile(local); err != nil || string(b) != "hi\n" {
		t.Fatalf("cp out: %q, %v", b, err)
	}

	src := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f.txt"), []byte("deep"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("cp", src, name+":/home/user/dir")
	if out := d.must("exec", name, "--", "cat", "/home/user/dir/sub/f.txt"); out != "deep" {
		t.Fatalf("cp dir in: got %q", out)
	}
	if out := d.must("exec", name, "--", "id", "-u"); out != "1000\n" {
		t.Fatalf("default user: id -u = %q, want 1000", out)
	}
	if out := d.must("exec", "-u", "root", name, "--", "id", "-u"); out != "0\n" {
		t.Fatalf("-u root: id -u = %q", out)
	}
	if out := d.must("exec", name, "--", "hostname"); strings.TrimSpace(out) != id {
		t.Fatalf("hostname = %q, want the id %s", out, id)
	}

	if out := d.must("ls"); !strings.Contains(out, name) {
		t.Fatalf("ls does not show %s:\n%s", name, out)
	}
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(d.must("inspect", name, "--json")), &sb); err != nil {
		t.Fatal(err)
	}
	if sb.ID != id || sb.State != api.StateRunning || sb.ImageDigest == "" {
		t.Fatalf("inspect: %+v", sb)
	}

	d.must("stop", name)
	if err := json.Unmarshal([]byte(d.must("inspect", name, "--json")), &sb); err != nil || sb.State != api.StateStopped {
		t.Fatalf("after stop: state %q, %v", sb.State, err)
	}
	d.must("start", name)
	if out := d.must("exec", name, "--", "cat", "/home/user/a.txt"); out != "hi\n" {
		t.Fatalf("file lost across stop/start: %q", out)
	}
	d.must("rm", name)
	_, errOut, code := d.run("rm", name)
	if low := strings.ToLower(errOut); code == 0 || !(strings.Contains(low, "not found") || strings.Contains(low, "no such sandbox")) {
		t.Fatalf("second rm: exit %d, stderr %q; want a not-found error", code, errOut)
	}
}

// TestExecFaults: a missing command, a command that never ends, stdin, env
// and cwd.
func TestExecFaults(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	name := uniqueName("faults")
	d.must("create", "--name", name, "--image", "busybox")

	_, errOut, code := d.run("exec", name, "--", "no-such-command")
	if code != 127 || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing command: exit %d, stderr %q; want 127 and a message", code, errOut)
	}
	_, errOut, code = d.run("exec", "--timeout", "1s", name, "--", "sh", "-c", "sleep 1000")
	if code != 124 {
		t.Fatalf("timeout: exit %d, stderr %q; want 124", code, errOut)
	}
	if out := d.must("exec", name, "--", "sh", "-c", "ps -o comm | grep -c sleep || true"); strings.TrimSpace(out) != "0" {
		t.Fatalf("the timed-out command's processes are still running: %q", out)
	}
	out, _, code := d.runStdin([]byte("from stdin\n"), "exec", "-i", name, "--", "cat")
	if code != 0 || out != "from stdin\n" {
		t.Fatalf("stdin: exit %d, %q", code, out)
	}
	if out := d.must("exec", "-e", "A=1", "-w", "/tmp", name, "--", "sh", "-c", "echo $A $(pwd)"); out != "1 /tmp\n" {
		t.Fatalf("env and cwd: %q", out)
	}
	_, errOut, code = d.run("exec", name, "--", "sh", "-c", "echo oops >&2; exit 5")
	if code != 5 || errOut != "oops\n" {
		t.Fatalf("stderr and exit: %d %q", code, errOut)
	}
}

// TestImportExportTar: do's --import-tar puts files in before the command
// and --export-tar takes the writable layer out.
func TestImportExportTar(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	dir := t.TempDir()
	in := filepath.Join(dir, "in.tar")
	writeTar(t, in, map[string]string{"home/user/input.txt": "imported\n"})
	out := filepath.Join(dir, "out.tar")
	got := d.must("do", "--image", "busybox", "--import-tar", in, "--export-tar", out, "--",
		"sh", "-c", "cat /home/user/input.txt && echo made > /home/user/made.txt")
	if got != "imported\n" {
		t.Fatalf("import: %q", got)
	}
	files := readTar(t, out)
	if files["home/user/made.txt"] != "made\n" {
		t.Fatalf("export does not hold the file the command made; entries: %v", keys(files))
	}
}

// TestBackgroundProcessOutlivesItsCommand checks the README's "a command
// ends" row: what a command starts in the background keeps running after
// the command returns (as with docker exec), until the sandbox stops; a
// command killed by its timeout takes its process group with it
// (TestExecFaults).
func TestBackgroundProcessOutlivesItsCommand(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	name := uniqueName("bg")
	d.must("create", "--name", name, "--image", "busybox")
	d.must("exec", name, "--", "sh", "-c", "sleep 1000 >/dev/null 2>&1 &")
	count := func() string {
		return strings.TrimSpace(d.must("exec", name, "--", "sh", "-c", "ps -o comm | grep -c '^sleep' || true"))
	}
	if got := count(); got != "1" {
		t.Fatalf("after the command returned, %s background sleep runs; want 1", got)
	}
	d.must("stop", name)
	d.must("start", name)
	if got := count(); got != "0" {
		t.Fatalf("after stop and start, %s background sleep runs; want 0", got)
	}
}
