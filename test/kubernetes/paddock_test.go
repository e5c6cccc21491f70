package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/paddock-dev/paddock/test/kubernetes/cluster"
)

// paddockBin is the paddock binary built once for the package by
// scripts/build.sh, as `make build` makes it.
var (
	paddockOnce sync.Once
	paddockBin  string
	paddockDir  string // removed by TestMain
	paddockErr  error
)

func buildPaddock(t *testing.T) string {
	t.Helper()
	paddockOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pdk-k8s-bin")
		if err != nil {
			paddockErr = err
			return
		}
		paddockDir = dir
		out := filepath.Join(dir, "paddock")
		cmd := exec.Command("../../scripts/build.sh", out)
		if b, err := cmd.CombinedOutput(); err != nil {
			paddockErr = fmt.Errorf("scripts/build.sh: %v: %s", err, b)
			return
		}
		paddockBin = out
	})
	if paddockErr != nil {
		t.Fatal(paddockErr)
	}
	return paddockBin
}

// paddockd is a `paddock serve --backend kubernetes` on the test cluster.
type paddockd struct {
	t      *testing.T
	bin    string
	dir    string
	socket string
	log    *bytes.Buffer

	cluster *cluster.Cluster
	args    []string // added to paddock serve
	env     []string // added to its environment
	local   bool     // the local backend instead of the cluster
	cmd     *exec.Cmd
	done    chan struct{}
}

func startPaddock(t *testing.T, c *cluster.Cluster, args ...string) *paddockd {
	t.Helper()
	return startPaddockEnv(t, c, nil, args...)
}

// startPaddockEnv is startPaddock with env added to the daemon's
// environment.
func startPaddockEnv(t *testing.T, c *cluster.Cluster, env []string, args ...string) *paddockd {
	t.Helper()
	bin := buildPaddock(t)
	dir, err := os.MkdirTemp("", "pdk-k8s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &paddockd{t: t, bin: bin, dir: dir, socket: filepath.Join(dir, "pd.sock"), log: new(bytes.Buffer), cluster: c, args: args, env: env}
	d.start()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	return d
}

// start runs `paddock serve` on d's state dir and waits until it answers.
func (d *paddockd) start() {
	t := d.t
	t.Helper()
	images := os.Getenv("PADDOCK_TEST_IMAGE_CACHE")
	if images == "" {
		images = filepath.Join(d.dir, "images")
	}
	args := []string{"serve", "--backend", "kubernetes", "--kubeconfig", d.cluster.Kubeconfig}
	if d.local {
		args = []string{"serve"}
	}
	args = append(append(args, "--state-dir", filepath.Join(d.dir, "state"), "--socket", d.socket, "--log-level", "debug"), d.args...)
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(append(os.Environ(), "PADDOCK_IMAGES_DIR="+images, "PADDOCK_PREVIEW_LISTEN=off", "PADDOCK_PREPARE_DEFAULT_IMAGE=false"), d.env...)
	cmd.Stdout, cmd.Stderr = d.log, d.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	d.cmd, d.done = cmd, done
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, _, code := d.run("info"); code == 0 {
			return
		}
		select {
		case <-done:
			t.Fatalf("paddock serve exited:\n%s", d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("paddock serve not ready in 60s:\n%s", d.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the daemon with SIGTERM (its sandboxes keep running).
func (d *paddockd) stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.cmd = nil
}

// poolTest is what a pool test on the cluster starts from: a daemon on
// the cluster with busybox on the node, a dynamic client for
// agent-sandbox's objects, and a 10-minute context ended at the test's
// end.
func poolTest(t *testing.T) (*cluster.Cluster, *paddockd, dynamic.Interface, context.Context) {
	t.Helper()
	c := clusterFor(t)
	d := startPaddock(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	importImage(ctx, t, d, "busybox")
	return c, d, dc, ctx
}

// buildTemplate writes body as the template file name.toml in d's
// directory and builds it.
func (d *paddockd) buildTemplate(name, body string) {
	d.t.Helper()
	f := filepath.Join(d.dir, name+".toml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		d.t.Fatal(err)
	}
	d.must("template", "build", "-f", f)
}

// importImage exports one of the daemon's images as an OCI archive and
// imports it into the cluster's node.
func importImage(ctx context.Context, t *testing.T, d *paddockd, name string) {
	t.Helper()
	archive := filepath.Join(d.dir, name+".tar")
	d.must("images", "export", name, "-o", archive)
	defer os.Remove(archive)
	if err := d.cluster.ImportImages(ctx, archive); err != nil {
		t.Fatal(err)
	}
}

// kill9 kills the daemon with SIGKILL: no shutdown of its own.
func (d *paddockd) kill9() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.done
	d.cmd = nil
}

func (d *paddockd) run(args ...string) (string, string, int) {
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(os.Environ(), "PADDOCK_SOCKET="+d.socket)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return stdout.String(), stderr.String(), code
}

func (d *paddockd) must(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.run(args...)
	if code != 0 {
		d.t.Fatalf("paddock %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestPaddockOnKubernetes drives the unmodified CLI against a daemon whose
// sandboxes are agent-sandbox Sandboxes on the test cluster: an image
// exported and imported into the node, create, exec, files, a session, the
// pod's isolation settings, the agent refusing requests without the
// sandbox's token, and delete leaving nothing behind.
func TestPaddockOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d := startPaddock(t, c)

	archive := filepath.Join(d.dir, "busybox.tar")
	out := d.must("images", "export", "busybox", "-o", archive)
	if !strings.Contains(out, "paddock.local/busybox:") {
		t.Fatalf("export: %q", out)
	}
	if err := c.ImportImages(ctx, archive); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var sb struct {
		ID, State, Runtime string
	}
	if err := json.Unmarshal([]byte(d.must("--json", "create", "--image", "busybox")), &sb); err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	if sb.State != "running" {
		t.Fatalf("created sandbox: %+v", sb)
	}
	if got := d.must("exec", sb.ID, "--", "sh", "-c", "echo hello; hostname"); got != "hello\n"+sb.ID+"\n" {
		t.Fatalf("exec: %q", got)
	}
	firstExec := time.Since(start)
	t.Logf("figure: kubernetes backend cold create %v, create to first exec %v", created.Round(time.Millisecond), firstExec.Round(time.Millisecond))

	// Files both ways.
	local := filepath.Join(d.dir, "note.txt")
	if err := os.WriteFile(local, []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("cp", local, sb.ID+":/tmp/note.txt")
	if got := d.must("exec", sb.ID, "--", "cat", "/tmp/note.txt"); got != "from the host\n" {
		t.Fatalf("file in: %q", got)
	}
	d.must("exec", sb.ID, "--", "sh", "-c", "echo from the pod > /tmp/back.txt")
	back := filepath.Join(d.dir, "back.txt")
	d.must("cp", sb.ID+":/tmp/back.txt", back)
	if b, err := os.ReadFile(back); err != nil || string(b) != "from the pod\n" {
		t.Fatalf("file out: %q %v", b, err)
	}

	// A session keeps its shell between commands.
	d.must("session", "create", sb.ID, "--name", "s1")
	d.must("exec", sb.ID, "--session", "s1", "--", "cd", "/tmp")
	if got := d.must("exec", sb.ID, "--session", "s1", "--", "pwd"); got != "/tmp\n" {
		t.Fatalf("session pwd: %q", got)
	}

	// The pod holds no cluster credential and runs no other container.
	pod, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("the pod mounts a service account token")
	}
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image == "" {
		t.Errorf("pod containers: %+v", pod.Spec.Containers)
	}
	if _, _, code := d.run("exec", sb.ID, "--", "ls", "/var/run/secrets/kubernetes.io"); code == 0 {
		t.Errorf("the sandbox sees a kubernetes service account directory")
	}
	if got := d.must("exec", sb.ID, "--", "sh", "-c", "env | grep -c PADDOCK_AGENT_ || true"); got != "0\n" {
		t.Errorf("the agent's variables reach the sandbox's processes: %q", got)
	}

	// Network none is a NetworkPolicy that denies all egress; egress
	// needs the daemon's proxy for the pods, which this daemon has not
	// (TestEgressOnKubernetes).
	np, err := c.Client.NetworkingV1().NetworkPolicies("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's NetworkPolicy: %v", err)
	}
	if len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 || np.Spec.PodSelector.MatchLabels["paddock.dev/sandbox"] != sb.ID {
		t.Errorf("NetworkPolicy: %+v", np.Spec)
	}
	if _, errOut, code := d.run("create", "--image", "busybox", "--network", "egress"); code == 0 || !strings.Contains(errOut, "--kube-egress-proxy") {
		t.Errorf("create with network egress: exit %d, %q", code, errOut)
	}

	// What the backend cannot do yet is refused by name.
	for _, args := range [][]string{{"pause", sb.ID}} {
		if _, errOut, code := d.run(args...); code == 0 || !strings.Contains(errOut, "on the kubernetes backend") {
			t.Errorf("paddock %s: exit %d, %q", strings.Join(args, " "), code, errOut)
		}
	}

	// The agent answers nobody without the sandbox's token.
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, tok := range []string{"", strings.Repeat("0", 64)} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pod.Status.PodIP+":49983/health", nil)
		if tok != "" {
			req.Header.Set("X-Paddock-Agent-Token", tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("reach the agent: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("agent without the token (%q): status %d", tok, resp.StatusCode)
		}
	}

	// A daemon restart re-adopts the running sandbox: its session's shell
	// is still where it was.
	d.stop()
	d.start()
	if got := d.must("exec", sb.ID, "--session", "s1", "--", "pwd"); got != "/tmp\n" {
		t.Fatalf("session pwd after a daemon restart: %q", got)
	}

	// The home directory is a volume of the Sandbox, the default user's.
	d.must("exec", sb.ID, "--", "sh", "-c", "echo kept > /home/user/kept.txt")
	if got := d.must("exec", sb.ID, "--", "stat", "-c", "%u %a", "/home/user"); got != "1000 755\n" {
		t.Errorf("home volume owner and mode: %q", got)
	}

	// A pod deleted under a running sandbox: the sandbox says so, and a
	// start brings it back with its home.
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, "paddock-"+sb.ID, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var st struct {
		State  string
		Reason string `json:"error_reason"`
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := json.Unmarshal([]byte(d.must("--json", "inspect", sb.ID)), &st); err != nil {
			t.Fatal(err)
		}
		if st.State != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if st.State != "error" || !strings.Contains(st.Reason, "pod") {
		t.Fatalf("sandbox after its pod was deleted: %+v", st)
	}
	d.must("start", sb.ID)
	if got := d.must("exec", sb.ID, "--", "cat", "/home/user/kept.txt"); got != "kept\n" {
		t.Fatalf("home after the pod was deleted and the sandbox started: %q", got)
	}

	// Stop suspends the Sandbox (no pod); start brings the home back.
	d.must("exec", sb.ID, "--", "sh", "-c", "echo second > /home/user/second.txt")
	start = time.Now()
	d.must("stop", sb.ID)
	stopped := time.Since(start)
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+sb.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod of a stopped sandbox: %v", err)
	}
	start = time.Now()
	d.must("start", sb.ID)
	if got := d.must("exec", sb.ID, "--", "cat", "/home/user/kept.txt", "/home/user/second.txt"); got != "kept\nsecond\n" {
		t.Fatalf("home after stop and start: %q", got)
	}
	t.Logf("figure: kubernetes backend stop %v, start to first exec %v", stopped.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// Snapshots copy the home directory; a restore writes it in once.
	checkSnapshotRestore(t, d, sb.ID) // snapshot_test.go

	// Delete leaves no Sandbox, Secret or pod.
	d.must("rm", sb.ID)
	checkGone(ctx, t, c, sb.ID)
}

// checkGone checks that nothing of sandbox id is left on the cluster: no
// Sandbox, Secret, pod, NetworkPolicy or home PersistentVolumeClaim.
func checkGone(ctx context.Context, t *testing.T, c *cluster.Cluster, id string) {
	t.Helper()
	checkGoneIn(ctx, t, c, "default", id)
}

// checkGoneIn is checkGone in namespace ns.
func checkGoneIn(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, id string) {
	t.Helper()
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	name := "paddock-" + id
	if _, err := dc.Resource(sandboxResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Sandbox after rm: %v", err)
	}
	for _, sec := range []string{name, name + "-egress"} {
		if _, err := c.Client.CoreV1().Secrets(ns).Get(ctx, sec, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s after rm: %v", sec, err)
		}
	}
	if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after rm: %v", err)
	}
	if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("NetworkPolicy after rm: %v", err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "home-"+name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("home PersistentVolumeClaim after rm: %v", err)
	}
}
