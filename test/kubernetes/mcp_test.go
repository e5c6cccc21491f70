package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMCPOnKubernetes drives a Kubernetes-backed daemon with an
// independent MCP client (@modelcontextprotocol/inspector-cli, pinned in
// test/compat/mcp) over `paddock mcp` on stdio: the tools create a sandbox
// that is a pod, run a command and move a file in it, and destroy it.
func TestMCPOnKubernetes(t *testing.T) {
	c := clusterFor(t)
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/install-deps.sh with PADDOCK_TEST_DEPS=1)", tool)
		}
	}
	d := startPaddock(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	importImage(ctx, t, d, "busybox")

	// The client, installed outside the work tree.
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join("..", "compat", "mcp", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npm := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	// inspector-cli looks for ../package.json from its working directory.
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	// One process per call; the server first, then the call, then after
	// "--" the rest of the server's command line.
	call := func(args ...string) map[string]any {
		t.Helper()
		argv := append(append([]string{cli, d.bin}, args...), "--", "mcp", "--socket", d.socket)
		cmd := exec.CommandContext(ctx, "node", argv...)
		cmd.Dir = run
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector-cli %v: %v\nstdout: %s\nstderr: %s", args, err, out, stderr.String())
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("inspector-cli printed %q: %v", out, err)
		}
		if v["isError"] == true {
			t.Fatalf("tool call %v failed: %v", args, v)
		}
		return v
	}
	tool := func(name string, args ...string) map[string]any {
		t.Helper()
		argv := []string{"--method", "tools/call", "--tool-name", name}
		for _, a := range args {
			argv = append(argv, "--tool-arg", a)
		}
		sc, _ := call(argv...)["structuredContent"].(map[string]any)
		return sc
	}

	list := call("--method", "tools/list")
	tools, _ := list["tools"].([]any)
	if len(tools) < 10 {
		t.Fatalf("tools/list: %v", list)
	}
	created := tool("sandbox_create", "image=busybox")
	sb, _ := created["sandbox"].(map[string]any)
	id, _ := sb["id"].(string)
	if id == "" || sb["state"] != "running" {
		t.Fatalf("sandbox_create: %v", created)
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			d.run("rm", id)
		}
	})
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+id, metav1.GetOptions{}); err != nil {
		t.Fatalf("the sandbox's pod: %v", err)
	}
	if res := tool("exec", "sandbox="+id, "command=echo from-mcp; hostname; exit 3"); res["stdout"] != "from-mcp\n"+id+"\n" || res["exit_code"] != float64(3) {
		t.Fatalf("exec: %v", res)
	}
	if res := tool("write_file", "sandbox="+id, "path=notes/mcp.txt", "content=written by an MCP client"); res["bytes"] != float64(len("written by an MCP client")) {
		t.Fatalf("write_file: %v", res)
	}
	if res := tool("read_file", "sandbox="+id, "path=/home/user/notes/mcp.txt"); !strings.Contains(res["content"].(string), "written by an MCP client") {
		t.Fatalf("read_file: %v", res)
	}
	if got := d.must("exec", id, "--", "cat", "/home/user/notes/mcp.txt"); got != "written by an MCP client" {
		t.Fatalf("the file as the CLI reads it: %q", got)
	}
	if res := tool("sandbox_destroy", "sandbox="+id); res["destroyed"] != id {
		t.Fatalf("sandbox_destroy: %v", res)
	}
	destroyed = true
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, "paddock-"+id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pod of a destroyed sandbox: %v", err)
	}
}
