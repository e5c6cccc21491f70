package kubernetes_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2BSDKOnKubernetes runs the unmodified e2b SDK's suite, every test
// of it (test/compat/e2b, e2b.test.mjs), against a daemon whose
// sandboxes are pods: the E2B API on the daemon's TCP listener, the envd
// data plane relayed to each pod's agent. Its pause is E2B's
// filesystem-only pause (a pod cannot be frozen): the home is kept. Its
// metrics are read by the pod's agent from the container's cgroup.
func TestE2BSDKOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	requireNode(t)
	addr := freeLoopbackAddr(t)
	d := startPaddock(t, c, "--listen", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// The E2B default template is Paddock's base image.
	archive := filepath.Join(d.dir, "base.tar")
	start := time.Now()
	d.must("images", "export", "base", "-o", archive)
	exported := time.Since(start)
	if err := c.ImportImages(ctx, archive); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(archive)
	t.Logf("figure: base image export %v, export and node import %v", exported.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "k8s-compat"))

	out, err := runE2BSuite(ctx, t, addr, key, "e2b.test.mjs")
	if err != nil {
		t.Fatalf("the e2b SDK suite failed on the kubernetes backend: %v", err)
	}
	if n := strings.Count(out, "✔"); n < 19 {
		t.Fatalf("the suite passed %d tests; want the 19 the backend serves", n)
	}
}

// requireNode fails the test without node and npm.
func requireNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/install-deps.sh with PADDOCK_TEST_DEPS=1)", tool)
		}
	}
}

// freeLoopbackAddr is a loopback TCP address nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runE2BSuite installs test/compat/e2b's packages and runs the node test
// files there against the daemon's E2B API on addr with key, logging and
// returning their report.
func runE2BSuite(ctx context.Context, t *testing.T, addr, key string, files ...string) (string, error) {
	t.Helper()
	suite := "../compat/e2b"
	npm := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	npm.Dir = suite
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	start := time.Now()
	node := exec.CommandContext(ctx, "node", append([]string{"--test", "--test-concurrency=1", "--test-reporter=spec"}, files...)...)
	node.Dir = suite
	url := "http://" + addr
	node.Env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key)
	out, err := node.CombinedOutput()
	t.Logf("node --test %s (%s):\n%s", strings.Join(files, " "), time.Since(start).Round(time.Second), out)
	return string(out), err
}

// TestE2BTemplateBuildOnKubernetes runs the unmodified e2b SDK's template
// builds (test/compat/e2b, templates.test.mjs: Template.build with copy
// and run steps, users, env, a start command with its ready check, tags,
// two builds at once, a failing step) against a daemon with
// --kube-image-push: every build step runs in a pod, and the SDK's
// Sandbox.create right after Template.build runs the template's image,
// which the daemon pushed to the registry on the way.
func TestE2BTemplateBuildOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	requireNode(t)
	addr := freeLoopbackAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, d := startPushingPaddock(ctx, t, c, "--listen", addr)
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "k8s-templates"))
	out, err := runE2BSuite(ctx, t, addr, key, "templates.test.mjs")
	if err != nil {
		t.Fatalf("the e2b SDK's template builds failed on the kubernetes backend: %v", err)
	}
	if n := strings.Count(out, "✔"); n < 7 {
		t.Fatalf("the suite passed %d tests; want all 7", n)
	}
	if !strings.Contains(d.log.String(), "msg=\"image pushed\"") {
		t.Error("no image was pushed")
	}
}
