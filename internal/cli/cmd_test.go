package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock/paddocktest"
)

// result is what one CLI invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func newFake(t *testing.T) *paddocktest.Server {
	t.Helper()
	s := paddocktest.NewServer()
	t.Cleanup(s.Close)
	// Keep the developer's environment out of the tests.
	t.Setenv("PADDOCK_URL", "")
	t.Setenv("PADDOCK_SOCKET", "")
	t.Setenv("PADDOCK_API_KEY", "")
	return s
}

func runCLI(t *testing.T, s *paddocktest.Server, stdin string, args ...string) result {
	t.Helper()
	return runCLICtx(t, context.Background(), s, stdin, args...)
}

func runCLICtx(t *testing.T, ctx context.Context, s *paddocktest.Server, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--url", s.URL}, args...)
	code := run(ctx, full, strings.NewReader(stdin), &out, &errOut)
	t.Logf("paddock %s -> %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errOut.String())
	return result{code, out.String(), errOut.String()}
}

func TestCreateLsInspectStopStartRm(t *testing.T) {
	s := newFake(t)
	r := runCLI(t, s, "", "create", "--name", "dev", "--memory", "1G", "--cpu", "0.5", "--label", "team=a", "--env", "A=1", "--keep-alive")
	if r.code != 0 {
		t.Fatalf("create failed: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	if ids := s.Sandboxes(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("create printed %q; sandboxes %v", id, ids)
	}

	r = runCLI(t, s, "", "--json", "inspect", "dev")
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || r.code != 0 {
		t.Fatalf("inspect --json: %v %+v", err, r)
	}
	if sb.Resources.MemoryMB != 1024 || sb.Resources.CPU != 0.5 || sb.Labels["team"] != "a" || sb.Env["A"] != "1" || !sb.KeepAlive {
		t.Fatalf("sandbox created with %+v", sb)
	}
	if r = runCLI(t, s, "", "inspect", "dev"); r.code != 0 || !strings.Contains(r.stdout, "memory=1024MiB") || !strings.Contains(r.stdout, "team=a") {
		t.Fatalf("inspect: %+v", r)
	}

	r = runCLI(t, s, "", "ls", "--label", "team=a")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[1], id) {
		t.Fatalf("ls: %+v", r)
	}
	if r = runCLI(t, s, "", "ls", "--label", "team=b"); len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 1 {
		t.Fatalf("ls with a label nobody has: %+v", r)
	}
	r = runCLI(t, s, "", "--json", "ls")
	var list api.SandboxList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Sandboxes) != 1 {
		t.Fatalf("ls --json: %v %+v", err, r)
	}

	if r = runCLI(t, s, "", "stop", "dev"); r.code != 0 || !strings.Contains(r.stdout, "stopped") {
		t.Fatalf("stop: %+v", r)
	}
	if r = runCLI(t, s, "", "start", "dev"); r.code != 0 || !strings.Contains(r.stdout, "running") {
		t.Fatalf("start: %+v", r)
	}
	if r = runCLI(t, s, "", "rm", "dev"); r.code != 0 || len(s.Sandboxes()) != 0 {
		t.Fatalf("rm: %+v, left %v", r, s.Sandboxes())
	}
	r = runCLI(t, s, "", "rm", "dev")
	if r.code != 1 || !strings.Contains(r.stderr, "no such sandbox") {
		t.Fatalf("rm of a missing sandbox: %+v", r)
	}
	r = runCLI(t, s, "", "rm", "x1", "x2")
	if r.code != 1 || strings.Count(r.stderr, "no such sandbox") != 2 {
		t.Fatalf("rm of two missing sandboxes: %+v", r)
	}
}

func TestCreateRejectsBadFlagsLocally(t *testing.T) {
	s := newFake(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"create", "--memory", "lots"}, "512M, 2G or 1GiB"},
		{[]string{"create", "--disk", "0"}, "--disk"},
		{[]string{"create", "--runtime", "kata"}, "runc, gvisor or crun"},
		{[]string{"create", "--env", "1X=2"}, "--env"},
		{[]string{"create", "--label", "nolabel"}, "--label"},
		{[]string{"do", "--memory", "7X", "--", "true"}, "unknown unit"},
	}
	for _, tt := range tests {
		r := runCLI(t, s, "", tt.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: %+v, want an error containing %q", tt.args, r, tt.want)
		}
	}
	if s.Requests("POST /v1/sandboxes") != 0 {
		t.Fatal("a bad flag still reached the daemon")
	}
}

func TestExec(t *testing.T) {
	s := newFake(t)
	runCLI(t, s, "", "create", "--name", "dev")
	tests := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		stdout   string
		stderr   string
		contains bool
	}{
		{name: "output", args: []string{"exec", "dev", "--", "echo", "hi", "-n"}, stdout: "hi -n\n"},
		{name: "flags after the id belong to the command", args: []string{"exec", "dev", "echo", "-l"}, stdout: "-l\n"},
		{name: "exit code", args: []string{"exec", "dev", "exit", "7"}, code: 7, stderr: "exiting\n"},
		{name: "signal", args: []string{"exec", "dev", "kill", "SIGTERM"}, code: 143},
		{name: "timeout", args: []string{"exec", "--timeout", "1s", "dev", "sleep-timeout"}, code: 124},
		{name: "stdin", args: []string{"exec", "-i", "dev", "cat"}, stdin: "piped", stdout: "piped"},
		{name: "no stdin without -i", args: []string{"exec", "dev", "cat"}, stdin: "piped", stdout: ""},
		{name: "stream error", args: []string{"exec", "dev", "fail"}, code: 1, stderr: "agent went away", contains: true},
		{name: "missing sandbox", args: []string{"exec", "nope", "echo"}, code: 1, stderr: `sandbox "nope" not found`, contains: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, s, tt.stdin, tt.args...)
			if r.code != tt.code || r.stdout != tt.stdout {
				t.Fatalf("got %+v", r)
			}
			if tt.contains && !strings.Contains(r.stderr, tt.stderr) || !tt.contains && tt.stderr != "" && r.stderr != tt.stderr {
				t.Fatalf("stderr %q, want %q", r.stderr, tt.stderr)
			}
		})
	}
}

func TestDoAlwaysDestroys(t *testing.T) {
	s := newFake(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "etc/motd", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("hi"))
	_ = tw.Close()
	if err := os.WriteFile(in, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.tar")

	var seenTimeout string
	var seenLifetime string
	s.Exec = func(sb *api.Sandbox, req api.ExecRequest, emit func(api.ExecEvent)) api.ExecEvent {
		seenTimeout, seenLifetime = req.Timeout, sb.Timeout
		return paddocktest.DefaultExec(sb, req, emit)
	}
	r := runCLI(t, s, "", "do", "--import-tar", in, "--export-tar", out, "--timeout", "30s", "--", "exit", "3")
	if r.code != 3 {
		t.Fatalf("do: %+v", r)
	}
	if seenTimeout != "30s" || seenLifetime == "" || seenLifetime == "30s" {
		t.Fatalf("command timeout %q, sandbox lifetime %q", seenTimeout, seenLifetime)
	}
	if len(s.Sandboxes()) != 0 {
		t.Fatalf("do left sandboxes %v", s.Sandboxes())
	}
	if n := s.Requests("PUT /v1/sandboxes/sb000000000000000001/tar user=root"); n != 1 {
		t.Fatalf("import as root: %d requests", n)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := tar.NewReader(f).Next()
	if err != nil || h.Name != "etc/" {
		t.Fatalf("exported layer starts with %+v, %v", h, err)
	}

	// A failing command, a failing stream and a cancelled run all tear down.
	for _, args := range [][]string{{"do", "--", "fail"}, {"do", "--", "nosuchcmd"}, {"do", "--import-tar", filepath.Join(dir, "missing.tar"), "--", "true"}} {
		r := runCLI(t, s, "", args...)
		if r.code == 0 || len(s.Sandboxes()) != 0 {
			t.Fatalf("%v: %+v, left %v", args, r, s.Sandboxes())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.Exec = func(sb *api.Sandbox, req api.ExecRequest, emit func(api.ExecEvent)) api.ExecEvent {
		emit(api.ExecEvent{Type: api.EventStdout, Data: []byte("working\n")})
		cancel() // the user presses Ctrl-C while the command runs
		time.Sleep(200 * time.Millisecond)
		return api.ExecEvent{}
	}
	r = runCLICtx(t, ctx, s, "", "do", "--", "long")
	if r.code != exitInterrupted || len(s.Sandboxes()) != 0 {
		t.Fatalf("interrupted do: %+v, left %v", r, s.Sandboxes())
	}
}

func TestCp(t *testing.T) {
	s := newFake(t)
	runCLI(t, s, "", "create", "--name", "dev")
	id := s.Sandboxes()[0]
	dir := t.TempDir()
	src := filepath.Join(dir, "proj")
	mustWrite(t, filepath.Join(src, "a.txt"), "A")
	mustWrite(t, filepath.Join(src, "sub", "b.txt"), "B")
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, s, "", "cp", src, "dev:/home/user/proj"); r.code != 0 {
		t.Fatalf("cp dir in: %+v", r)
	}
	if f := s.File(id, "/home/user/proj/sub/b.txt"); f == nil || string(f.Data) != "B" {
		t.Fatalf("b.txt in the sandbox: %+v", f)
	}
	if f := s.File(id, "/home/user/proj/link"); f == nil || f.Symlink != "/etc/passwd" {
		t.Fatalf("the symlink was not copied as a link: %+v", f)
	}
	// Into an existing directory: under the source's name.
	if r := runCLI(t, s, "", "cp", filepath.Join(src, "a.txt"), "dev:/tmp"); r.code != 0 {
		t.Fatalf("cp file in: %+v", r)
	}
	if f := s.File(id, "/tmp/a.txt"); f == nil || string(f.Data) != "A" {
		t.Fatalf("a.txt: %+v", f)
	}
	// Relative sandbox paths are the user's home.
	if r := runCLI(t, s, "", "cp", filepath.Join(src, "a.txt"), "dev:notes.txt"); r.code != 0 || s.File(id, "/home/user/notes.txt") == nil {
		t.Fatalf("cp to a relative path: %+v", r)
	}

	out := filepath.Join(dir, "back")
	if r := runCLI(t, s, "", "cp", "dev:/home/user/proj", out); r.code != 0 {
		t.Fatalf("cp dir out: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(out, "sub", "b.txt")); err != nil || string(b) != "B" {
		t.Fatalf("b.txt back: %q %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(out, "link")); err != nil || l != "/etc/passwd" {
		t.Fatalf("link back: %q %v", l, err)
	}
	if r := runCLI(t, s, "", "cp", "dev:/tmp/a.txt", dir); r.code != 0 {
		t.Fatalf("cp file out: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "A" {
		t.Fatalf("a.txt back: %q %v", b, err)
	}
	if r := runCLI(t, s, "", "cp", "dev:/tmp/a.txt", "-"); r.code != 0 || r.stdout != "A" {
		t.Fatalf("cp to stdout: %+v", r)
	}
	if r := runCLI(t, s, "", "cp", "dev:/nope", dir); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("cp of a missing file: %+v", r)
	}
}

func mustWrite(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestImagesKeysVersion(t *testing.T) {
	s := newFake(t)
	if r := runCLI(t, s, "", "images", "ls"); r.code != 0 || !strings.Contains(r.stdout, "base") || !strings.Contains(r.stdout, "150.0MiB") {
		t.Fatalf("images ls: %+v", r)
	}
	if r := runCLI(t, s, "", "images", "build", "tools"); r.code != 0 || !strings.Contains(r.stdout, "progress: building tools") || !strings.Contains(r.stdout, "built tools sha256:") {
		t.Fatalf("images build: %+v", r)
	}
	if r := runCLI(t, s, "", "images", "build", "broken"); r.code != 1 || !strings.Contains(r.stderr, "no such builder") {
		t.Fatalf("broken build: %+v", r)
	}
	r := runCLI(t, s, "", "keys", "create", "ci")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "pdk_key1_secret" || !strings.Contains(r.stderr, "not shown again") {
		t.Fatalf("keys create: %+v", r)
	}
	if r := runCLI(t, s, "", "keys", "create", "--scope", "all", "ops"); r.code != 0 || !strings.Contains(r.stderr, "scope all") {
		t.Fatalf("keys create --scope all: %+v", r)
	}
	if r := runCLI(t, s, "", "keys", "create", "--scope", "some", "bad"); r.code == 0 || !strings.Contains(r.stderr, `--scope "some"`) {
		t.Fatalf("keys create --scope some: %+v", r)
	}
	if r := runCLI(t, s, "", "keys", "ls"); r.code != 0 || !strings.Contains(r.stdout, "key1") || strings.Contains(r.stdout, "secret") ||
		!strings.Contains(r.stdout, "SCOPE") || !strings.Contains(r.stdout, "own") || !strings.Contains(r.stdout, "all") {
		t.Fatalf("keys ls: %+v", r)
	}
	if r := runCLI(t, s, "", "keys", "rm", "key1"); r.code != 0 {
		t.Fatalf("keys rm: %+v", r)
	}
	if r := runCLI(t, s, "", "keys", "rm", "key1"); r.code != 1 {
		t.Fatalf("keys rm twice: %+v", r)
	}
	if r := runCLI(t, s, "", "version"); r.code != 0 || !strings.Contains(r.stdout, "daemon: test") {
		t.Fatalf("version: %+v", r)
	}
}

func TestDaemonDown(t *testing.T) {
	t.Setenv("PADDOCK_URL", "")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--socket", filepath.Join(t.TempDir(), "none.sock"), "ls"}, strings.NewReader(""), &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "paddock serve") {
		t.Fatalf("code %d stderr %q", code, errOut.String())
	}
	// version still answers, and says the daemon is down.
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"--socket", filepath.Join(t.TempDir(), "none.sock"), "version"}, strings.NewReader(""), &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "client:") || !strings.Contains(errOut.String(), "not reachable") {
		t.Fatalf("version with the daemon down: %d %q %q", code, out.String(), errOut.String())
	}
}

// A create builds on first use only the built-in image it runs on, and
// says what that build takes: a restore runs on its snapshot's image, so
// it builds nothing.
func TestFirstUseBuildsTheImageUsed(t *testing.T) {
	s := newFake(t)
	s.SetImages() // nothing built yet; the default image is base
	builds := func() int {
		return s.Requests("POST /v1/images/base/build") + s.Requests("POST /v1/images/busybox/build")
	}
	for _, args := range [][]string{
		{"do", "--from-snapshot", "snap1", "--", "echo", "restored"},
		{"create", "--from-snapshot", "snap1"},
	} {
		r := runCLI(t, s, "", args...)
		if r.code != 0 || strings.Contains(r.stderr, "building image") || builds() != 0 {
			t.Fatalf("paddock %v built an image (%d builds): %+v", args, builds(), r)
		}
	}
	for _, tt := range []struct {
		args      []string
		image     string
		want, not string
	}{
		{[]string{"create", "--image", "busybox"}, "busybox", "(a few seconds)", "Debian"},
		{[]string{"do", "--", "echo", "hi"}, "base", "Debian's packages", "a few seconds"},
	} {
		r := runCLI(t, s, "", tt.args...)
		if r.code != 0 || s.Requests("POST /v1/images/"+tt.image+"/build") != 1 {
			t.Fatalf("paddock %v: %+v", tt.args, r)
		}
		if !strings.Contains(r.stderr, "building image "+tt.image+" on first use") ||
			!strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, tt.not) {
			t.Errorf("paddock %v says %q; want %q and not %q", tt.args, r.stderr, tt.want, tt.not)
		}
	}
}
