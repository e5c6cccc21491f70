package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

const webTemplate = `
name = "web"
image = "busybox"
cwd = "/app"
start = ["httpd", "-f", "-p", "8080", "-h", "/app"]

[env]
GREETING = "hi"

[ready]
port = 8080

[[step]]
run = "mkdir -p /app && echo built > /app/built"

[[step]]
copy = "src"
to = "/app"

[[step]]
env = { STAGE = "two" }

[[step]]
run = "echo $STAGE > /app/stage && chmod -R a+rX /app"
`

func writeTemplate(t *testing.T, body string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(dir, "t.toml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func tplExec(t *testing.T, d *daemon, id, script string) string {
	t.Helper()
	var out bytes.Buffer
	res, err := d.client.Exec(ctxT(t, time.Minute), id, paddock.ExecOptions{Cmd: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: %v %v: %s", script, err, res, out.String())
	}
	return out.String()
}

// TestTemplateBuildCacheAndFailure builds a template through the CLI,
// rebuilds it from the cache, rebuilds after a context change, creates a
// sandbox whose start command must pass its port check, and checks that a
// failing step shows its output and records nothing.
func TestTemplateBuildCacheAndFailure(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	f := writeTemplate(t, webTemplate, map[string]string{"src/hello.txt": "hello v1\n"})

	out := d.must("template", "build", "-f", f)
	for _, want := range []string{"step 1/4: run\n", "step 2/4: copy\n", "step 4/4: run\n", "built template web"} {
		if !strings.Contains(out, want) {
			t.Fatalf("first build output lacks %q:\n%s", want, out)
		}
	}
	first, err := d.client.Template(ctxT(t, time.Minute), "web")
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	out = d.must("template", "build", "-f", f)
	t.Logf("rebuild with every step cached: %s", time.Since(start))
	if strings.Count(out, "(cached)") != 4 {
		t.Fatalf("rebuild ran steps again:\n%s", out)
	}
	again, _ := d.client.Template(ctxT(t, time.Minute), "web")
	if again.BuildID != first.BuildID {
		t.Fatalf("unchanged rebuild changed the build id: %s -> %s", first.BuildID, again.BuildID)
	}

	id := strings.TrimSpace(d.must("create", "--template", "web", "--name", "w1"))
	got := tplExec(t, d, id, `cat /app/built /app/stage /app/hello.txt; echo "$GREETING"; wget -q -O - http://127.0.0.1:8080/hello.txt`)
	if got != "built\ntwo\nhello v1\nhi\nhello v1\n" {
		t.Fatalf("sandbox from template sees %q", got)
	}

	// A changed context file invalidates its copy step and everything after.
	if err := os.WriteFile(filepath.Join(filepath.Dir(f), "src", "hello.txt"), []byte("hello v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = d.must("template", "build", "-f", f)
	if !strings.Contains(out, "step 1/4: run (cached)") || strings.Contains(out, "step 2/4: copy (cached)") || strings.Contains(out, "step 4/4: run (cached)") {
		t.Fatalf("rebuild after a context change:\n%s", out)
	}
	id2 := strings.TrimSpace(d.must("create", "--template", "web"))
	if got := tplExec(t, d, id2, "cat /app/hello.txt"); got != "hello v2\n" {
		t.Fatalf("rebuilt template has %q", got)
	}

	// A failing step: its output and exit code are shown, nothing is recorded.
	bad := writeTemplate(t, `
name = "broken"
image = "busybox"
[[step]]
run = "echo about-to-fail; exit 3"
`, nil)
	stdout, stderr, code := d.run("template", "build", "-f", bad)
	if code == 0 || !strings.Contains(stdout+stderr, "about-to-fail") || !strings.Contains(stderr, "exit code 3") {
		t.Fatalf("failed step: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, err := d.client.Template(ctxT(t, time.Minute), "broken"); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("failed build left a template: %v", err)
	}
	ls := d.must("template", "ls")
	if strings.Contains(ls, "broken") || !strings.Contains(ls, "web") {
		t.Fatalf("template ls:\n%s", ls)
	}
	// The two sandboxes created from web count, across its rebuild.
	counted := false
	for _, line := range strings.Split(ls, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "web" {
			counted = f[len(f)-3] == "2" && f[len(f)-1] == "ago"
		}
	}
	if !counted {
		t.Errorf("template ls does not count web's two sandboxes:\n%s", ls)
	}
	list, err := d.client.List(ctxT(t, time.Minute), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("want only the two created sandboxes after builds, got %d: %+v", len(list), list)
	}

	// A start command that never passes its check: the create fails and
	// leaves nothing behind.
	d.must("template", "build", "-f", writeTemplate(t, `
name = "never"
image = "busybox"
start = ["sleep", "1000"]
[ready]
port = 9
timeout = "2s"
`, nil))
	if _, stderr, code := d.run("create", "--template", "never"); code == 0 || !strings.Contains(stderr, "readiness check did not pass") {
		t.Fatalf("unready template: exit %d: %s", code, stderr)
	}
	if list, _ := d.client.List(ctxT(t, time.Minute), map[string]string{"paddock.dev/template": "never"}); len(list) != 0 {
		t.Fatalf("unready sandbox left behind: %+v", list)
	}

	// A readiness command: the create returns once it exits 0 (the start
	// command writes the file it looks for after a while), and fails, with
	// the command's last exit code, when it never does.
	d.must("template", "build", "-f", writeTemplate(t, `
name = "bycmd"
image = "busybox"
start = ["sh", "-c", "sleep 0.5; echo up > /tmp/ready; exec sleep 100000"]
[ready]
cmd = "test -s /tmp/ready"
timeout = "20s"
`, nil))
	d.must("create", "--template", "bycmd", "--name", "bycmd1")
	if got := d.must("exec", "bycmd1", "--", "cat", "/tmp/ready"); strings.TrimSpace(got) != "up" {
		t.Fatalf("create returned before its readiness command passed: %q", got)
	}
	d.must("template", "build", "-f", writeTemplate(t, `
name = "cmdnever"
image = "busybox"
start = ["sleep", "1000"]
[ready]
cmd = "exit 3"
timeout = "1s"
`, nil))
	if _, stderr, code := d.run("create", "--template", "cmdnever"); code == 0 || !strings.Contains(stderr, "exited with code 3") {
		t.Fatalf("never-ready command: exit %d: %s", code, stderr)
	}
	if list, _ := d.client.List(ctxT(t, time.Minute), map[string]string{"paddock.dev/template": "cmdnever"}); len(list) != 0 {
		t.Fatalf("unready sandbox left behind: %+v", list)
	}

	// Bad definitions are refused before anything runs.
	for _, body := range []string{
		"name = \"x\"\nbogus = 1\n",
		"name = \"x\"\n[[step]]\nrun = \"true\"\nuser = \"root\"\n",
		"name = \"x\"\n[[step]]\ncopy = \"../etc\"\nto = \"/app\"\n",
		"name = \"x\"\n[[step]]\ncopy = \"missing\"\nto = \"/app\"\n",
		"name = \"x\"\nimage = \"busybox\"\n[[step]]\ncopy = \"missing\"\nto = \"/app\"\n",
		"name = \"x\"\nimage = \"no-such-image\"\n",
		"name = \"x\"\ntemplate = \"no-such-template\"\n",
		"name = \"x\"\nstart = [\"true\"]\n[ready]\nport = 1\nlog = \"x\"\n",
		"name = \"x\"\nstart = [\"true\"]\n[ready]\ncmd = \"true\"\nlog = \"x\"\n",
	} {
		if _, stderr, code := d.run("template", "build", "-f", writeTemplate(t, body, nil)); code == 0 {
			t.Fatalf("definition %q was accepted", body)
		} else if stderr == "" {
			t.Fatalf("definition %q refused without a message", body)
		}
	}
}

const loopTemplate = `
name = "pt"
image = "busybox"
start = ["sh", "-c", "echo pool-ready; exec sleep 100000"]
[ready]
log = "pool-ready"
[[step]]
run = "echo pooled > /etc/pooled"
`

func waitPoolReady(t *testing.T, d *daemon, name string, n int) *api.Pool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := d.client.Pool(ctxT(t, time.Minute), name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Ready >= n {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s never had %d ready: %+v", name, n, p)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPoolServeConcurrentAndDeletedTemplate serves creates from a warm
// pool, binds identifiers, overflows the pool with concurrent creates, and
// deletes the pool's template under it.
func TestPoolServeConcurrentAndDeletedTemplate(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	d.must("template", "build", "-f", writeTemplate(t, loopTemplate, nil))
	d.must("pool", "set", "pt", "--min-ready", "2")
	waitPoolReady(t, d, "pt", 2)
	ctx := ctxT(t, 5*time.Minute)
	if info := d.must("info"); !strings.Contains(info, "POOL") || !strings.Contains(info, "\npt ") {
		t.Fatalf("paddock info does not show the pool:\n%s", info)
	}

	claimStart := time.Now()
	sb, err := d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt", Name: "served", Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	warm := time.Since(claimStart)
	coldStart := time.Now()
	cold, err := d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt", Env: map[string]string{"X": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Exec(ctx, cold.ID, paddock.ExecOptions{Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("claim to first exec: pool %s, cold (env given, so not poolable) %s", warm, time.Since(coldStart))
	if sb.Name != "served" || sb.Labels["team"] != "a" || sb.Labels["paddock.dev/pool"] != "pt" {
		t.Fatalf("served sandbox %+v", sb)
	}
	if got := tplExec(t, d, sb.ID, "cat /etc/pooled"); got != "pooled\n" {
		t.Fatalf("pooled sandbox lacks the template's files: %q", got)
	}
	if p, _ := d.client.Pool(ctx, "pt"); p.Served != 1 {
		t.Fatalf("pool after one claim: %+v", p)
	}

	// An identifier is bound on first use and returns the same sandbox after.
	a := strings.TrimSpace(d.must("create", "--pool", "pt", "--identifier", "user-1"))
	b := strings.TrimSpace(d.must("create", "--pool", "pt", "--identifier", "user-1"))
	if a != b {
		t.Fatalf("identifier user-1 gave %s then %s", a, b)
	}
	// The same binding through the identifier API: the sandbox, and any
	// sandbox route under the identifier's prefix.
	if sb, err := d.client.IdentifierSandbox(ctx, "pt", "user-1"); err != nil || sb.ID != a {
		t.Fatalf("identifier API: %v %+v, want %s", err, sb, a)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	resp, err := hc.Post("http://paddock/v1/pools/pt/identifiers/user-1/exec", "application/json", strings.NewReader(`{"cmd":["hostname"]}`))
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(stream), `"type":"end","exit_code":0`) || !strings.Contains(string(stream), base64.StdEncoding.EncodeToString([]byte(a+"\n"))) {
		t.Fatalf("exec under the identifier prefix: %d %s", resp.StatusCode, stream)
	}
	if _, err := d.client.IdentifierSandbox(ctx, "no-such-pool", "user-1"); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("identifier in a missing pool: %v", err)
	}
	if _, err := d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt", Labels: map[string]string{"paddock.dev/pool-ready": "true"}}); !errors.Is(err, paddock.ErrInvalidArgument) {
		t.Fatalf("reserved label accepted: %v", err)
	}

	// 100 concurrent creates against a pool of 4: all succeed, each its
	// own; the overflow is created cold.
	d.must("pool", "set", "pt", "--min-ready", "4")
	waitPoolReady(t, d, "pt", 4)
	const burst = 100
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  = map[string]bool{}
		errs []error
	)
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[s.ID] = true
		}()
	}
	wg.Wait()
	if len(errs) > 0 || len(ids) != burst {
		t.Fatalf("concurrent creates: %d distinct, errors %v", len(ids), errs)
	}
	p, _ := d.client.Pool(ctx, "pt")
	if p.Served < 4 || p.Cold < 1 || p.Served+p.Cold < burst+2 {
		t.Fatalf("pool counters after the overflow: %+v", p)
	}
	t.Logf("after %d concurrent creates: served %d, cold %d", burst, p.Served, p.Cold)
	var metrics strings.Builder
	if err := d.client.Metrics(ctx, &metrics); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("paddock_pool_served_total{pool=\"pt\"} %d\n", p.Served),
		fmt.Sprintf("paddock_pool_cold_total{pool=\"pt\"} %d\n", p.Cold),
		"paddock_pool_min_ready{pool=\"pt\"} 4\n",
		"paddock_sandboxes{state=\"running\",runtime=\"runc\"} ",
	} {
		if !strings.Contains(metrics.String(), want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics.String())
		}
	}
	t.Cleanup(func() {
		for id := range ids {
			_ = d.client.Delete(ctxT(t, time.Minute), id)
		}
	})

	// The template goes away: the pool stops refilling, drops its ready
	// sandboxes, says why, and creates against it are refused clearly.
	waitPoolReady(t, d, "pt", 1)
	d.must("template", "rm", "pt")
	_, stderr, code := d.run("create", "--pool", "pt")
	if code == 0 || !strings.Contains(stderr, "was deleted") {
		t.Fatalf("create from a pool without its template: exit %d: %s", code, stderr)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := d.client.Pool(ctx, "pt")
		if err != nil {
			t.Fatal(err)
		}
		if p.Ready == 0 && strings.Contains(p.Error, "was deleted") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool after its template was deleted: %+v", p)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ls := d.must("pool", "ls"); !strings.Contains(ls, "was deleted") {
		t.Fatalf("pool ls does not say the template is gone:\n%s", ls)
	}
	d.must("pool", "rm", "pt")
	if _, err := d.client.Pool(ctx, "pt"); !errors.Is(err, paddock.ErrNotFound) {
		t.Fatalf("removed pool: %v", err)
	}
}

// TestPoolCooldownAndStaleReplacement checks that a served sandbox is
// destroyed once idle for the pool's cooldown, and that rebuilding the
// template replaces the pool's ready sandboxes with ones of the new build.
func TestPoolCooldownAndStaleReplacement(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	f := writeTemplate(t, loopTemplate, nil)
	d.must("template", "build", "-f", f)
	d.must("pool", "set", "pt", "--min-ready", "1", "--cooldown", "2s")
	waitPoolReady(t, d, "pt", 1)
	ctx := ctxT(t, 3*time.Minute)

	sb, err := d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt"})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := d.client.Pool(ctx, "pt"); p.Served != 1 {
		t.Fatalf("not served from the pool: %+v", p)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := d.client.Get(ctx, sb.ID)
		if errors.Is(err, paddock.ErrNotFound) || (err == nil && got.State == api.StateDestroyed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("served sandbox outlived its cooldown: %+v %v", got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	waitPoolReady(t, d, "pt", 1)
	before, _ := d.client.Template(ctx, "pt")
	if err := os.WriteFile(f, []byte(strings.Replace(loopTemplate, "echo pooled", "echo pooled-v2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("template", "build", "-f", f)
	after, _ := d.client.Template(ctx, "pt")
	if after.BuildID == before.BuildID {
		t.Fatal("a changed step kept the build id")
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		ready, err := d.client.List(ctx, map[string]string{"paddock.dev/pool": "pt", "paddock.dev/pool-ready": "true"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ready) == 1 && ready[0].Labels["paddock.dev/build"] == after.BuildID && ready[0].State == api.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool was not replaced after the rebuild: %+v", ready)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sb, err = d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tplExec(t, d, sb.ID, "cat /etc/pooled"); got != "pooled-v2\n" {
		t.Fatalf("served sandbox is of the old build: %q", got)
	}
}

// TestTemplateOnGVisor builds a template under gVisor and creates a
// sandbox of it there, readiness check included.
func TestTemplateOnGVisor(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	f := writeTemplate(t, strings.Replace(webTemplate, `image = "busybox"`, "image = \"busybox\"\nruntime = \"gvisor\"", 1), map[string]string{"src/hello.txt": "hello gvisor\n"})
	d.must("template", "build", "-f", f)
	id := strings.TrimSpace(d.must("create", "--template", "web"))
	sb, err := d.client.Get(ctxT(t, time.Minute), id)
	if err != nil || sb.Runtime != api.RuntimeGVisor {
		t.Fatalf("sandbox %+v %v", sb, err)
	}
	if got := tplExec(t, d, id, "wget -q -O - http://127.0.0.1:8080/hello.txt; cat /app/stage"); got != "hello gvisor\ntwo\n" {
		t.Fatalf("gVisor sandbox from template sees %q", got)
	}
}

// TestPoolClaimsHoldQuota races creates against a pool under a quota:
// claims count against the claimant like creates do, unclaimed pooled
// sandboxes count against no caller, and no race over-admits.
func TestPoolClaimsHoldQuota(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	d.must("template", "build", "-f", writeTemplate(t, loopTemplate, nil))
	d.must("pool", "set", "pt", "--min-ready", "2")
	waitPoolReady(t, d, "pt", 2)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"max_sandboxes_local": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("policy", "set", policy)
	ctx := ctxT(t, 3*time.Minute)
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		okN, deniedN   int
		unexpectedErrs []error
	)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				okN++
			case errors.Is(err, paddock.ErrPermissionDenied):
				deniedN++
			default:
				unexpectedErrs = append(unexpectedErrs, err)
			}
		}()
	}
	wg.Wait()
	if okN != 3 || deniedN != 5 || len(unexpectedErrs) > 0 {
		t.Fatalf("8 creates under a quota of 3: %d admitted, %d denied, other errors %v", okN, deniedN, unexpectedErrs)
	}

	// allowed_templates: a template not listed is refused, directly and
	// through its pool, naming the rule; a listed one is admitted.
	for _, c := range []struct {
		policy string
		ok     bool
	}{{`{"allowed_templates": ["other"]}`, false}, {`{"allowed_templates": ["pt"]}`, true}} {
		if err := os.WriteFile(policy, []byte(c.policy), 0o644); err != nil {
			t.Fatal(err)
		}
		d.must("policy", "set", policy)
		_, err := d.client.Create(ctx, api.CreateSandboxRequest{Template: "pt"})
		switch {
		case c.ok && err != nil:
			t.Fatalf("%s: listed template refused: %v", c.policy, err)
		case !c.ok && (!errors.Is(err, paddock.ErrPermissionDenied) || !strings.Contains(err.Error(), "allowed_templates")):
			t.Fatalf("%s: unlisted template: %v, want permission_denied naming allowed_templates", c.policy, err)
		}
	}
}

// TestTemplateBuildSendsOnlyCopiedFiles keeps a template file beside a file
// larger than a build context may be: only what the copy step names is
// sent, so the build goes through.
func TestTemplateBuildSendsOnlyCopiedFiles(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	f := writeTemplate(t, `
name = "beside-big"
image = "busybox"

[[step]]
copy = "app.txt"
to = "/srv"
`, map[string]string{"app.txt": "hello\n"})
	big, err := os.Create(filepath.Join(filepath.Dir(f), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(80 << 20); err != nil { // sparse: 80 MiB read, no disk used
		t.Fatal(err)
	}
	big.Close()
	d.must("template", "build", "-f", f)
	id := strings.TrimSpace(d.must("create", "--template", "beside-big"))
	if got := tplExec(t, d, id, "cat /srv/app.txt"); got != "hello\n" {
		t.Fatalf("sandbox from the template sees %q", got)
	}
}
