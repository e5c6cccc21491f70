package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// inspectorCLI installs the npm MCP client pinned in test/compat/mcp
// (package-lock.json) into a temporary directory, so the work tree stays
// clean, and returns the path of its entry point.
func inspectorCLI(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s for the independent MCP client (apt-get install nodejs npm)", tool)
		}
	}
	_, here, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(here), "..", "compat", "mcp")
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxT(t, 5*time.Minute)
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	// inspector-cli 1.0.3 checks for "../package.json" against the working
	// directory but imports it relative to its own module: run it one level
	// below a directory holding a package.json so that both agree.
	if err := os.Mkdir(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build", "index.js")
}

// TestMCPWithNpmClient lists and calls Paddock's tools with a second,
// independent MCP client (@modelcontextprotocol/inspector-cli, TypeScript
// SDK), over stdio and over the daemon's /mcp.
func TestMCPWithNpmClient(t *testing.T) {
	cli := inspectorCLI(t)
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 3*time.Minute)
	key, err := d.client.CreateKey(ctx, "npm")
	if err != nil {
		t.Fatal(err)
	}
	inspect := func(t *testing.T, args ...string) map[string]any {
		t.Helper()
		cmd := exec.CommandContext(ctx, "node", append([]string{cli}, args...)...)
		cmd.Dir = filepath.Join(filepath.Dir(cli), "..", "..", "..", "..", "run")
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
		return v
	}
	targets := map[string][]string{
		"stdio": {paddockBin(t), "--", "mcp", "--socket", d.socket},
		"http":  {"http://" + d.listen + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + key.Secret},
	}
	for _, name := range []string{"stdio", "http"} {
		target := targets[name]
		// The server goes first (--tool-arg takes every word after it), then
		// the options, then, after "--", the rest of the server's command line.
		with := func(args ...string) []string {
			return append(append([]string{target[0]}, args...), target[1:]...)
		}
		t.Run(name, func(t *testing.T) {
			list := inspect(t, with("--method", "tools/list")...)
			tools, _ := list["tools"].([]any)
			seen := map[string]bool{}
			for _, tl := range tools {
				m, _ := tl.(map[string]any)
				n, _ := m["name"].(string)
				seen[n] = true
			}
			for _, want := range []string{"exec", "read_file", "write_file", "edit_file", "grep", "find", "list_dir", "sandbox_create", "sandbox_list", "sandbox_destroy"} {
				if !seen[want] {
					t.Errorf("tools/list lacks %s: %v", want, list)
				}
			}
			// One call per process: the default sandbox of each call's
			// session is destroyed when that process disconnects.
			res := inspect(t, with("--method", "tools/call", "--tool-name", "exec", "--tool-arg", "command=echo from-npm; exit 4")...)
			sc, _ := res["structuredContent"].(map[string]any)
			if sc["stdout"] != "from-npm\n" || sc["exit_code"] != float64(4) || res["isError"] == true {
				t.Fatalf("exec through inspector-cli: %v", res)
			}
			res = inspect(t, with("--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=/no/such/file")...)
			if res["isError"] != true {
				t.Fatalf("read_file of a missing file is not a tool error: %v", res)
			}
			if name == "stdio" {
				// Over HTTP, inspector-cli exits without ending its session,
				// so its default sandboxes live until the session idles out
				// (TestMCPDefaultSandbox covers a client that ends it).
				waitNoSandboxes(t, d)
			}
		})
	}
}

// waitNoSandboxes waits until every default sandbox made by the sessions
// above is gone.
func waitNoSandboxes(t *testing.T, d *daemon) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	for {
		list, err := d.client.List(ctx, map[string]string{"paddock.mcp": "default"})
		if err == nil && len(list) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("default sandboxes outlived their sessions: %v %v", list, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
