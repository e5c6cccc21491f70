package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
)

// bearer adds an API key to every request of the MCP client.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connectMCP returns a Go MCP client session over the named transport.
func connectMCP(t *testing.T, d *daemon, transport string, key string) *mcpsdk.ClientSession {
	t.Helper()
	return connectMCPIn(t, d, transport, key, "")
}

// connectMCPIn is connectMCP in workspace mode when workspace is set
// (--workspace over stdio, ?workspace= over HTTP).
func connectMCPIn(t *testing.T, d *daemon, transport, key, workspace string) *mcpsdk.ClientSession {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	var tr mcpsdk.Transport
	switch transport {
	case "stdio":
		args := []string{"mcp", "--socket", d.socket, "--log-level", "info"}
		if workspace != "" {
			args = append(args, "--workspace", workspace)
		}
		cmd := exec.Command(paddockBin(t), args...)
		cmd.Stderr = d.logs
		tr = &mcpsdk.CommandTransport{Command: cmd}
	case "http":
		endpoint := "http://" + d.listen + "/mcp"
		if workspace != "" {
			endpoint += "?workspace=" + url.QueryEscape(workspace)
		}
		tr = &mcpsdk.StreamableClientTransport{Endpoint: endpoint,
			HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}}, MaxRetries: -1}
	default:
		t.Fatalf("unknown transport %s", transport)
	}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "paddock-e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect over %s: %v\n%s", transport, err, d.logs.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool and decodes its structured output into out; it fails
// the test when the tool reports an error, unless wantErr.
func call(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any, out any) *mcpsdk.CallToolResult {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): tool error: %s", name, args, resultText(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured output %s: %v", name, b, err)
		}
	}
	return res
}

// callErr calls a tool that must fail with a tool error (not a protocol
// error) whose text contains want.
func callErr(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v, want a tool error", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded, want a tool error containing %q", name, args, want)
	}
	if txt := resultText(res); !strings.Contains(txt, want) {
		t.Fatalf("%s: error %q does not contain %q", name, txt, want)
	}
}

func resultText(res *mcpsdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type mcpExecOut struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out"`
	Truncated bool   `json:"truncated"`
	Sandbox   string `json:"sandbox"`
}

// TestMCPFullTask drives the MCP server with the official Go SDK's client,
// over stdio (`paddock mcp`) and over the daemon's /mcp (TCP, API key),
// through a whole task: create, write a Python file, run it, grep, edit,
// run again, destroy, and the faults a model will hit on the way.
func TestMCPFullTask(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, time.Minute)
	key, err := d.client.CreateKey(ctx, "mcp")
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			cs := connectMCP(t, d, transport, key.Secret)
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tool := range tools.Tools {
				names[tool.Name] = true
				if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
					t.Errorf("tool %s lacks a description or a schema", tool.Name)
				}
			}
			for _, want := range []string{"sandbox_create", "sandbox_list", "sandbox_destroy", "exec", "read_file", "write_file", "edit_file", "list_dir", "find", "grep",
				"start_process", "process_logs", "stop_process", "list_all_processes", "kill_all_processes",
				"expose_port", "snapshot_create", "snapshot_restore"} {
				if !names[want] {
					t.Errorf("tool %s is missing", want)
				}
			}

			name := uniqueName("mcp-" + transport)
			var created struct {
				Sandbox struct{ ID, Name, State string } `json:"sandbox"`
			}
			call(t, cs, "sandbox_create", map[string]any{"name": name}, &created)
			if created.Sandbox.State != "running" {
				t.Fatalf("created sandbox is %q", created.Sandbox.State)
			}
			sb := map[string]any{"sandbox": name}
			with := func(kv ...any) map[string]any {
				m := map[string]any{"sandbox": name}
				for i := 0; i < len(kv); i += 2 {
					m[kv[i].(string)] = kv[i+1]
				}
				return m
			}
			prog := "def greet(who):\n    return 'hello ' + who\n\nprint(greet('paddock'))\nprint(greet('mcp'))\n"
			call(t, cs, "write_file", with("path", "proj/app.py", "content", prog), nil)
			var ex mcpExecOut
			call(t, cs, "exec", with("command", "python3 app.py", "cwd", "/home/user/proj"), &ex)
			if ex.ExitCode != 0 || ex.Stdout != "hello paddock\nhello mcp\n" {
				t.Fatalf("first run: %+v", ex)
			}
			var g struct {
				Matches []struct {
					File string
					Line int
					Text string
				}
			}
			call(t, cs, "grep", with("pattern", "greet\\(", "path", "proj", "glob", "*.py"), &g)
			if len(g.Matches) != 3 || g.Matches[0].Line != 1 || !strings.HasSuffix(g.Matches[0].File, "app.py") {
				t.Fatalf("grep: %+v", g)
			}
			var f struct{ Paths []string }
			call(t, cs, "find", with("pattern", "*.py"), &f)
			if len(f.Paths) != 1 || f.Paths[0] != "/home/user/proj/app.py" {
				t.Fatalf("find: %+v", f)
			}
			// An edit whose text occurs twice changes nothing and says so.
			callErr(t, cs, "edit_file", with("path", "proj/app.py", "old_string", "print(greet(", "new_string", "x"), "occurs 2 times")
			callErr(t, cs, "edit_file", with("path", "proj/app.py", "old_string", "not in the file", "new_string", "x"), "not found")
			var ed struct{ Replacements int }
			call(t, cs, "edit_file", with("path", "proj/app.py", "old_string", "'hello ' + who", "new_string", "'bye ' + who.upper()"), &ed)
			if ed.Replacements != 1 {
				t.Fatalf("edit: %+v", ed)
			}
			call(t, cs, "exec", with("command", "python3 proj/app.py"), &ex)
			if ex.ExitCode != 0 || ex.Stdout != "bye PADDOCK\nbye MCP\n" {
				t.Fatalf("second run: %+v", ex)
			}
			var rd struct {
				Content    string
				StartLine  int `json:"start_line"`
				EndLine    int `json:"end_line"`
				TotalLines int `json:"total_lines"`
				Truncated  bool
			}
			call(t, cs, "read_file", with("path", "proj/app.py", "offset", 2, "limit", 1), &rd)
			if rd.Content != "    return 'bye ' + who.upper()\n" || rd.StartLine != 2 || rd.EndLine != 2 || rd.TotalLines != 5 || !rd.Truncated {
				t.Fatalf("read_file range: %+v", rd)
			}
			var ls struct{ Entries []struct{ Name, Type string } }
			call(t, cs, "list_dir", with("path", "proj"), &ls)
			if len(ls.Entries) != 1 || ls.Entries[0].Name != "app.py" || ls.Entries[0].Type != "file" {
				t.Fatalf("list_dir: %+v", ls)
			}

			// Faults come back as tool errors the model can act on.
			call(t, cs, "exec", with("command", "echo oops >&2; exit 3"), &ex)
			if ex.ExitCode != 3 || ex.Stderr != "oops\n" {
				t.Fatalf("failing command: %+v", ex)
			}
			call(t, cs, "exec", with("command", "sleep 30", "timeout_seconds", 1), &ex)
			if !ex.TimedOut {
				t.Fatalf("timeout: %+v", ex)
			}
			call(t, cs, "exec", with("command", "head -c 3000000 /dev/zero | tr '\\0' x; echo END"), &ex)
			if !ex.Truncated || !strings.HasSuffix(ex.Stdout, "END\n") || len(ex.Stdout) > 20<<10 || !strings.Contains(ex.Stdout, "bytes omitted") {
				t.Fatalf("large output: truncated=%v len=%d", ex.Truncated, len(ex.Stdout))
			}
			callErr(t, cs, "exec", with("command", ""), "command is empty")
			callErr(t, cs, "exec", map[string]any{"sandbox": "no-such-sandbox", "command": "true"}, "sandbox_list")
			callErr(t, cs, "read_file", with("path", "proj/missing.py"), "not found")
			callErr(t, cs, "grep", with("pattern", ""), "pattern")
			callErr(t, cs, "exec", map[string]any{"sandbox": name, "command": 42}, "")

			var destroyed struct{ Destroyed string }
			call(t, cs, "sandbox_destroy", sb, &destroyed)
			if destroyed.Destroyed != created.Sandbox.ID {
				t.Fatalf("destroy: %+v", destroyed)
			}
			if _, err := d.client.Get(ctx, created.Sandbox.ID); !isNotFound(err) {
				t.Fatalf("destroyed sandbox still there: %v", err)
			}
		})
	}
}

func isNotFound(err error) bool { return err != nil && strings.Contains(err.Error(), "not found") }

// TestMCPDefaultSandbox checks that a tool naming no sandbox gets the
// session's own, that two sessions get two, and that each is destroyed when
// its session ends (kept with --keep).
func TestMCPDefaultSandbox(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 3*time.Minute)
	key, err := d.client.CreateKey(ctx, "mcp")
	if err != nil {
		t.Fatal(err)
	}
	// Without a key, /mcp is refused like the rest of the API.
	resp, err := http.Post("http://"+d.listen+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp without an API key: HTTP %d, want 401", resp.StatusCode)
	}

	a := connectMCP(t, d, "stdio", "")
	b := connectMCP(t, d, "http", key.Secret)
	var ea, eb mcpExecOut
	call(t, a, "exec", map[string]any{"command": "hostname"}, &ea)
	call(t, b, "exec", map[string]any{"command": "hostname"}, &eb)
	if ea.Sandbox == "" || ea.Sandbox == eb.Sandbox {
		t.Fatalf("sessions share a default sandbox: %q %q", ea.Sandbox, eb.Sandbox)
	}
	// The default persists between calls of one session.
	var again mcpExecOut
	call(t, a, "exec", map[string]any{"command": "true"}, &again)
	if again.Sandbox != ea.Sandbox {
		t.Fatalf("second call used %s, first %s", again.Sandbox, ea.Sandbox)
	}
	var list struct {
		Sandboxes []struct {
			ID      string
			Default bool
		}
	}
	call(t, a, "sandbox_list", nil, &list)
	marked := 0
	for _, s := range list.Sandboxes {
		if s.Default {
			marked++
			if s.ID != ea.Sandbox {
				t.Fatalf("sandbox_list marks %s as default, want %s", s.ID, ea.Sandbox)
			}
		}
	}
	if marked != 1 {
		t.Fatalf("sandbox_list marks %d defaults: %+v", marked, list)
	}

	for _, c := range []struct {
		cs *mcpsdk.ClientSession
		id string
	}{{a, ea.Sandbox}, {b, eb.Sandbox}} {
		if err := c.cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		waitGone(t, d, c.id)
	}

	// --keep leaves the default sandbox behind.
	cmd := exec.Command(paddockBin(t), "mcp", "--socket", d.socket, "--keep")
	cmd.Stderr = d.logs
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "paddock-e2e", Version: "1"}, nil)
	k, err := client.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ek mcpExecOut
	call(t, k, "exec", map[string]any{"command": "true"}, &ek)
	if err := k.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if sb, err := d.client.Get(ctx, ek.Sandbox); err != nil || sb.Labels["paddock.mcp"] != "default" {
		t.Fatalf("kept sandbox: %v %+v", err, sb)
	}
}

// waitGone waits until the daemon no longer knows the sandbox: HTTP sessions
// end asynchronously after the client's DELETE.
func waitGone(t *testing.T, d *daemon, id string) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	for {
		_, err := d.client.Get(ctx, id)
		if isNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("default sandbox %s outlived its session (last: %v)", id, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestMCPProcessesPreviewsSnapshots covers the tools built on background
// processes, preview URLs and snapshots, over stdio.
func TestMCPProcessesPreviewsSnapshots(t *testing.T) {
	requireHost(t)
	preview := freeAddr(t)
	t.Setenv("PADDOCK_PREVIEW_LISTEN", preview)
	d := startDaemon(t, daemonOpts{})
	cs := connectMCP(t, d, "stdio", "")
	call(t, cs, "write_file", map[string]any{"path": "site/index.html", "content": "hi from the sandbox\n"}, nil)
	var started struct {
		Process struct {
			ID, Status, Sandbox string
		}
	}
	call(t, cs, "start_process", map[string]any{"command": "echo serving; exec python3 -u -m http.server 8000", "cwd": "/home/user/site", "wait_for_port": 8000}, &started)
	if started.Process.ID == "" || started.Process.Status != "running" {
		t.Fatalf("start_process: %+v", started)
	}
	var logs struct {
		Stdout           string
		StdoutNextOffset int64 `json:"stdout_next_offset"`
	}
	call(t, cs, "process_logs", map[string]any{"process": started.Process.ID}, &logs)
	if logs.Stdout == "" || !strings.HasPrefix(logs.Stdout, "serving\n") || logs.StdoutNextOffset != int64(len(logs.Stdout)) {
		t.Fatalf("process_logs: %+v", logs)
	}
	var mcpExec mcpExecOut
	call(t, cs, "exec", map[string]any{"command": "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8000/index.html').read().decode(), end='')\""}, &mcpExec)
	if mcpExec.Stdout != "hi from the sandbox\n" {
		t.Fatalf("server inside the sandbox: %+v", mcpExec)
	}
	var exposed struct{ URL string }
	call(t, cs, "expose_port", map[string]any{"port": 8000}, &exposed)
	if !strings.Contains(exposed.URL, "8000") {
		t.Fatalf("expose_port: %+v", exposed)
	}
	// The URL reaches the server from outside the sandbox.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", preview)
		}}}
	resp, err := hc.Get(strings.TrimRight(exposed.URL, "/") + "/index.html")
	if err != nil {
		t.Fatalf("GET %s: %v", exposed.URL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hi from the sandbox\n" {
		t.Fatalf("GET %s: %d %q", exposed.URL, resp.StatusCode, body)
	}
	callErr(t, cs, "expose_port", map[string]any{"port": 70000}, "port")
	// Every process of the sandbox, the agent marked; then all but the
	// agent end, the started server with them.
	var procs struct {
		Processes []struct {
			Pid     int
			Command string
			Agent   bool
		}
	}
	call(t, cs, "list_all_processes", map[string]any{}, &procs)
	server := false
	for _, p := range procs.Processes {
		server = server || strings.Contains(p.Command, "http.server")
	}
	if len(procs.Processes) < 2 || !procs.Processes[0].Agent || procs.Processes[0].Pid != 1 || !server {
		t.Fatalf("list_all_processes: %+v", procs)
	}
	var killed struct {
		Killed    int
		Remaining []any
	}
	call(t, cs, "kill_all_processes", map[string]any{}, &killed)
	if killed.Killed < 1 || len(killed.Remaining) != 0 {
		t.Fatalf("kill_all_processes: %+v", killed)
	}
	var stopped struct{ Process struct{ Status string } }
	call(t, cs, "stop_process", map[string]any{"process": started.Process.ID}, &stopped)
	if stopped.Process.Status == "running" {
		t.Fatalf("stop_process: %+v", stopped)
	}
	callErr(t, cs, "process_logs", map[string]any{"process": "no-such-process"}, "process_logs failed")

	var snap struct{ ID string }
	call(t, cs, "snapshot_create", map[string]any{"name": uniqueName("mcp-snap")}, &snap)
	// A snapshot taken through MCP is in the sandbox's ledger, as one
	// taken through the API is.
	if es := ledgerEntries(t, d, started.Process.Sandbox, api.LedgerSnapshot); len(es) != 1 || es[0].Data["snapshot"] != snap.ID {
		t.Errorf("ledger's snapshot entries after snapshot_create: %+v; want one naming %s", es, snap.ID)
	}
	var restored struct{ Sandbox struct{ ID string } }
	call(t, cs, "snapshot_restore", map[string]any{"snapshot": snap.ID}, &restored)
	var rd struct{ Content string }
	call(t, cs, "read_file", map[string]any{"sandbox": restored.Sandbox.ID, "path": "site/index.html"}, &rd)
	if rd.Content != "hi from the sandbox\n" || restored.Sandbox.ID == started.Process.Sandbox {
		t.Fatalf("restored sandbox %s: %+v", restored.Sandbox.ID, rd)
	}
	callErr(t, cs, "snapshot_restore", map[string]any{"snapshot": "no-such-snapshot"}, "snapshot_restore failed")
}

// TestMCPSessionAndSnapshotOnEnd: exec in a named session keeps the shell's
// state between calls, and --snapshot-on-end keeps the default sandbox's
// files as a snapshot when it is destroyed.
func TestMCPSessionAndSnapshotOnEnd(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := ctxT(t, 3*time.Minute)
	cmd := exec.Command(paddockBin(t), "mcp", "--socket", d.socket, "--snapshot-on-end")
	cmd.Stderr = d.logs
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "paddock-e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var e mcpExecOut
	call(t, cs, "exec", map[string]any{"command": "cd /tmp && export GREETING=hi && echo kept > /home/user/work.txt", "session": "s1"}, &e)
	call(t, cs, "exec", map[string]any{"command": "echo $(pwd) $GREETING", "session": "s1"}, &e)
	if e.Stdout != "/tmp hi\n" {
		t.Fatalf("session state between calls: %q", e.Stdout)
	}
	callErr(t, cs, "exec", map[string]any{"command": "pwd", "session": "s1", "cwd": "/"}, "session")
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	waitGone(t, d, e.Sandbox)
	snaps, err := d.client.ListSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var snapID string
	for _, s := range snaps {
		if s.Name == "mcp-"+e.Sandbox {
			snapID = s.ID
		}
	}
	if snapID == "" {
		t.Fatalf("no snapshot mcp-%s after the session ended: %+v", e.Sandbox, snaps)
	}
	sb := create(t, d, api.CreateSandboxRequest{FromSnapshot: snapID})
	if out, code := execOut(t, d, sb.ID, "cat", "/home/user/work.txt"); code != 0 || out != "kept\n" {
		t.Fatalf("restored default sandbox: %d %q", code, out)
	}
}

// TestMCPCreateWithNetworkRules: sandbox_create's allow_hosts gives the
// sandbox egress limited to those hosts; without it there is none.
func TestMCPCreateWithNetworkRules(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	cs := connectMCP(t, d, "stdio", "")
	var out struct {
		Sandbox struct{ ID string }
	}
	call(t, cs, "sandbox_create", map[string]any{"image": "busybox", "allow_hosts": []string{"example.test"}, "deny_hosts": []string{"bad.example.test"}}, &out)
	t.Cleanup(func() { _ = d.client.Delete(ctxT(t, time.Minute), out.Sandbox.ID) })
	sb, err := d.client.Get(ctxT(t, time.Minute), out.Sandbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Network == nil || sb.Network.Mode != api.NetworkEgress || len(sb.Network.AllowHosts) != 1 || sb.Network.AllowHosts[0] != "example.test" || len(sb.Network.DenyHosts) != 1 {
		t.Fatalf("network of a sandbox created with allow_hosts: %+v", sb.Network)
	}
	call(t, cs, "sandbox_create", map[string]any{"image": "busybox"}, &out)
	t.Cleanup(func() { _ = d.client.Delete(ctxT(t, time.Minute), out.Sandbox.ID) })
	if sb, err = d.client.Get(ctxT(t, time.Minute), out.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if sb.Network != nil && sb.Network.Mode != api.NetworkNone {
		t.Fatalf("network without allow_hosts: %+v", sb.Network)
	}
}

// TestMCPMemorySnapshot: snapshot_create with memory keeps a gVisor
// sandbox's running processes, and snapshot_restore resumes them in the
// new sandbox.
func TestMCPMemorySnapshot(t *testing.T) {
	requireGVisor(t)
	d := startDaemon(t, daemonOpts{})
	cs := connectMCP(t, d, "stdio", "")
	var made struct{ Sandbox struct{ ID string } }
	call(t, cs, "sandbox_create", map[string]any{"image": "busybox", "runtime": "gvisor"}, &made)
	id := made.Sandbox.ID
	t.Cleanup(func() { _, _, _ = d.run("rm", id) })
	var e mcpExecOut
	call(t, cs, "exec", map[string]any{"sandbox": id, "command": counterLoop}, &e)
	before := readCount(t, d, id)

	var snap struct {
		ID         string `json:"id"`
		MemorySize int64  `json:"memory_size"`
	}
	call(t, cs, "snapshot_create", map[string]any{"sandbox": id, "memory": true, "ttl": "1h"}, &snap)
	if snap.MemorySize <= 0 {
		t.Fatalf("snapshot_create with memory: memory_size %d", snap.MemorySize)
	}
	var restored struct{ Sandbox struct{ ID string } }
	call(t, cs, "snapshot_restore", map[string]any{"snapshot": snap.ID}, &restored)
	rid := restored.Sandbox.ID
	t.Cleanup(func() { _, _, _ = d.run("rm", rid) })
	// The loop resumed: its pid is alive in the copy and it counts on
	// from where it was.
	call(t, cs, "exec", map[string]any{"sandbox": rid, "command": "kill -0 $(cat /home/user/loop.pid) && echo alive"}, &e)
	if e.ExitCode != 0 || strings.TrimSpace(e.Stdout) != "alive" {
		t.Fatalf("the counting loop did not resume in the restored sandbox: %+v", e)
	}
	first := readCount(t, d, rid)
	if first < before {
		t.Fatalf("restored count %d, before the snapshot %d", first, before)
	}
	deadline := time.Now().Add(20 * time.Second)
	for readCount(t, d, rid) <= first {
		if time.Now().After(deadline) {
			t.Fatal("the restored loop does not count")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMCPWorkspaceTools works in a workspace through MCP over stdio, as a
// model would: create it, run shell commands (no sandbox made), one that
// needs a program the shell lacks (auto sends it to the container), read
// the history and roll back.
func TestMCPWorkspaceTools(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 3*time.Minute)
	key, err := d.client.CreateKey(ctx, "mcp-ws")
	if err != nil {
		t.Fatal(err)
	}
	cs := connectMCP(t, d, "stdio", key.Secret)
	call(t, cs, "workspace_create", map[string]any{"name": "notes"}, nil)
	var run struct {
		ExitCode int      `json:"exit_code"`
		Stdout   string   `json:"stdout"`
		Executor string   `json:"executor"`
		Version  int64    `json:"version"`
		Changed  []string `json:"changed"`
	}
	call(t, cs, "workspace_run", map[string]any{"workspace": "notes", "command": "mkdir -p doc && printf 'b\\na\\n' > doc/list && sort doc/list"}, &run)
	if run.ExitCode != 0 || run.Stdout != "a\nb\n" || run.Executor != "shell" || run.Version != 1 || len(run.Changed) != 2 {
		t.Fatalf("shell command: %+v", run)
	}
	if list, _ := d.client.List(ctx, nil); len(list) != 0 {
		t.Fatalf("a shell command made %d sandboxes", len(list))
	}
	call(t, cs, "workspace_run", map[string]any{"workspace": "notes", "command": "python3 -c \"open('doc/list','a').write('c\\n')\" && wc -l < doc/list"}, &run)
	if run.ExitCode != 0 || strings.TrimSpace(run.Stdout) != "3" || run.Executor != "container" || run.Version != 2 {
		t.Fatalf("python3 under auto: %+v", run)
	}
	var hist struct {
		Versions []api.WorkspaceVersion `json:"versions"`
	}
	call(t, cs, "workspace_history", map[string]any{"workspace": "notes"}, &hist)
	if len(hist.Versions) != 2 || hist.Versions[0].Executor != "container" {
		t.Fatalf("history: %+v", hist)
	}
	call(t, cs, "workspace_rollback", map[string]any{"workspace": "notes", "version": 1}, nil)
	call(t, cs, "workspace_run", map[string]any{"workspace": "notes", "command": "cat doc/list"}, &run)
	if run.Stdout != "b\na\n" {
		t.Fatalf("after the rollback: %q", run.Stdout)
	}
	if err := d.client.DeleteWorkspace(ctx, "notes"); err != nil {
		t.Fatal(err)
	}
}

// TestMCPWorkspaceMode works through MCP in workspace mode, over stdio
// (paddock mcp --workspace) and over the daemon's /mcp?workspace=: the
// workspace is made on first use, the file tools and run work on it and
// make versions, edits that cannot apply change nothing, paths outside
// the workspace are refused, no sandbox is made, and two API keys naming
// the same workspace get one each.
func TestMCPWorkspaceMode(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	ctx := ctxT(t, 3*time.Minute)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			key, err := d.client.CreateKey(ctx, "mcp-wsmode-"+transport)
			if err != nil {
				t.Fatal(err)
			}
			ws := "mode-" + transport
			cs := connectMCPIn(t, d, transport, key.Secret, ws)
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tl := range tools.Tools {
				names[tl.Name] = true
			}
			for _, n := range []string{"run", "read_file", "write_file", "edit_file", "list_dir", "history", "diff", "rollback"} {
				if !names[n] {
					t.Errorf("workspace mode lacks %s", n)
				}
			}
			for _, n := range []string{"exec", "sandbox_create", "workspace_run"} {
				if names[n] {
					t.Errorf("workspace mode offers %s", n)
				}
			}
			var w struct {
				Path    string `json:"path"`
				Version int64  `json:"version"`
			}
			call(t, cs, "write_file", map[string]any{"path": "src/app.txt", "content": "hello\nworld\n"}, &w)
			if w.Path != "/workspace/src/app.txt" || w.Version != 1 {
				t.Fatalf("write_file: %+v", w)
			}
			var r struct {
				Content    string `json:"content"`
				StartLine  int    `json:"start_line"`
				EndLine    int    `json:"end_line"`
				TotalLines int    `json:"total_lines"`
			}
			call(t, cs, "read_file", map[string]any{"path": "src/app.txt", "offset": 2}, &r)
			if r.Content != "world\n" || r.StartLine != 2 || r.EndLine != 2 || r.TotalLines != 2 {
				t.Fatalf("read_file from line 2: %+v", r)
			}
			var e struct {
				Replacements int   `json:"replacements"`
				Version      int64 `json:"version"`
			}
			call(t, cs, "edit_file", map[string]any{"path": "/workspace/src/app.txt", "old_string": "world", "new_string": "there $& $1"}, &e)
			if e.Replacements != 1 || e.Version != 2 {
				t.Fatalf("edit_file: %+v", e)
			}
			callErr(t, cs, "edit_file", map[string]any{"path": "src/app.txt", "old_string": "absent", "new_string": "x"}, "was not found")
			call(t, cs, "write_file", map[string]any{"path": "twice.sh", "content": "a\na\n", "executable": true}, nil)
			callErr(t, cs, "edit_file", map[string]any{"path": "twice.sh", "old_string": "a", "new_string": "b"}, "occurs 2 times")
			var run struct {
				ExitCode int    `json:"exit_code"`
				Stdout   string `json:"stdout"`
				Executor string `json:"executor"`
				Version  int64  `json:"version"`
			}
			call(t, cs, "run", map[string]any{"command": "cat src/app.txt; printf 'a\\000b' > bin"}, &run)
			if run.ExitCode != 0 || run.Stdout != "hello\nthere $& $1\n" || run.Executor != "shell" || run.Version != 4 {
				t.Fatalf("run: %+v", run)
			}
			callErr(t, cs, "read_file", map[string]any{"path": "bin"}, "looks binary")
			callErr(t, cs, "read_file", map[string]any{"path": "/etc/passwd"}, "permission denied")
			callErr(t, cs, "read_file", map[string]any{"path": "../../etc/hostname"}, "permission denied")
			callErr(t, cs, "write_file", map[string]any{"path": "/tmp/x", "content": "x"}, "permission denied")
			callErr(t, cs, "read_file", map[string]any{"path": "missing.txt"}, "no such file")
			var ls struct {
				Path    string `json:"path"`
				Entries []struct {
					Name string `json:"name"`
					Type string `json:"type"`
					Size int64  `json:"size"`
					Mode string `json:"mode"`
				} `json:"entries"`
			}
			call(t, cs, "list_dir", map[string]any{}, &ls)
			got := []string{}
			for _, en := range ls.Entries {
				got = append(got, fmt.Sprintf("%s:%s:%d:%s", en.Name, en.Type, en.Size, en.Mode))
			}
			if ls.Path != "/workspace" || strings.Join(got, " ") != "bin:file:3:0644 src:dir:0:0755 twice.sh:file:4:0755" {
				t.Fatalf("list_dir: %s %v", ls.Path, got)
			}
			var hist struct {
				Versions []api.WorkspaceVersion `json:"versions"`
			}
			call(t, cs, "history", map[string]any{}, &hist)
			if len(hist.Versions) != 4 || !strings.HasPrefix(hist.Versions[2].Command, "// edit_file") || !strings.HasPrefix(hist.Versions[3].Command, "// write_file") {
				t.Fatalf("history: %+v", hist.Versions)
			}
			var diff struct {
				Changed []string `json:"changed"`
			}
			call(t, cs, "diff", map[string]any{"from": 1, "to": 2}, &diff)
			if strings.Join(diff.Changed, ",") != "~ src/app.txt" {
				t.Fatalf("diff 1..2: %v", diff.Changed)
			}
			call(t, cs, "rollback", map[string]any{"version": 1}, nil)
			call(t, cs, "read_file", map[string]any{"path": "src/app.txt"}, &r)
			if r.Content != "hello\nworld\n" {
				t.Fatalf("after the rollback: %q", r.Content)
			}
			// The workspace belongs to the key: the same name under
			// another key is another workspace.
			other, err := d.client.CreateKey(ctx, "mcp-wsmode-other-"+transport)
			if err != nil {
				t.Fatal(err)
			}
			cs2 := connectMCPIn(t, d, "http", other.Secret, ws)
			callErr(t, cs2, "read_file", map[string]any{"path": "src/app.txt"}, "no such file")
			if list, _ := d.client.List(ctx, nil); len(list) != 0 {
				t.Fatalf("workspace mode made %d sandboxes", len(list))
			}
			list, err := d.client.ListWorkspaces(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held := 0
			for _, x := range list {
				if x.Name == ws {
					held++
				}
			}
			if held != 2 {
				t.Fatalf("%d workspaces named %s, want one per key", held, ws)
			}
		})
	}
	// Bad requests are refused before any session starts.
	key, err := d.client.CreateKey(ctx, "mcp-wsmode-bad")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: bearer{key: key.Secret, base: http.DefaultTransport}}
	for q, want := range map[string]string{"workspace=a%2Fb": "not a workspace id or name", "workspace=x&keep=true": "a workspace session has none"} {
		resp, err := hc.Post("http://"+d.listen+"/mcp?"+q, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("/mcp?%s: %d %s", q, resp.StatusCode, body)
		}
	}
}
