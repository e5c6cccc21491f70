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
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/install-deps.sh with PADDOCK_TEST_DEPS=1)", tool)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
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

	suite := "../compat/e2b"
	npm := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	npm.Dir = suite
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	node := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec",
		"e2b.test.mjs")
	node.Dir = suite
	url := "http://" + addr
	node.Env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key)
	out, err := node.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the e2b SDK suite failed on the kubernetes backend: %v", err)
	}
	if n := strings.Count(string(out), "✔"); n < 19 {
		t.Fatalf("the suite passed %d tests; want the 19 the backend serves", n)
	}
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
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/install-deps.sh with PADDOCK_TEST_DEPS=1)", tool)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, d := startPushingPaddock(ctx, t, c, "--listen", addr)
	key := strings.TrimSpace(d.must("keys", "create", "--e2b", "k8s-templates"))

	suite := "../compat/e2b"
	npm := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	npm.Dir = suite
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	start := time.Now()
	node := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "--test-reporter=spec", "templates.test.mjs")
	node.Dir = suite
	url := "http://" + addr
	node.Env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key)
	out, err := node.CombinedOutput()
	t.Logf("node --test (%s):\n%s", time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("the e2b SDK's template builds failed on the kubernetes backend: %v", err)
	}
	if n := strings.Count(string(out), "✔"); n < 7 {
		t.Fatalf("the suite passed %d tests; want all 7", n)
	}
	if !strings.Contains(d.log.String(), "msg=\"image pushed\"") {
		t.Error("no image was pushed")
	}
}
