package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// maxLogChunk bounds one process_logs answer per stream.
const maxLogChunk = 16 << 10

// StartProcessInput is start_process's input.
type StartProcessInput struct {
	Sandbox     string            `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Command     string            `json:"command" jsonschema:"shell command line of a long-running process (a server, a watcher), run with /bin/sh -c"`
	ID          string            `json:"id,omitempty" jsonschema:"a name for the process (letters, digits, '.', '_', '-'); default generated"`
	Cwd         string            `json:"cwd,omitempty" jsonschema:"working directory; default /home/user"`
	Env         map[string]string `json:"env,omitempty"`
	WaitForPort int               `json:"wait_for_port,omitempty" jsonschema:"return only once this TCP port accepts connections inside the sandbox (at most 60 s)"`
}

// ProcessInfo describes one background process.
type ProcessInfo struct {
	ID       string `json:"id" jsonschema:"pass it as process to process_logs and stop_process"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
	Sandbox  string `json:"sandbox"`
}

func processInfo(p *api.Process, sandbox string) ProcessInfo {
	return ProcessInfo{ID: p.ID, Status: p.Status, ExitCode: p.ExitCode, Signal: p.Signal, Error: p.Error, Sandbox: sandbox}
}

// ProcessOutput wraps one process.
type ProcessOutput struct {
	Process ProcessInfo `json:"process"`
}

// LogsInput is process_logs's input.
type LogsInput struct {
	Sandbox      string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Process      string `json:"process" jsonschema:"the process id start_process returned"`
	StdoutOffset int64  `json:"stdout_offset,omitempty" jsonschema:"byte offset to read stdout from; pass the previous answer's stdout_next_offset to read on"`
	StderrOffset int64  `json:"stderr_offset,omitempty" jsonschema:"byte offset to read stderr from; pass the previous answer's stderr_next_offset"`
}

// LogsOutput is process_logs's output.
type LogsOutput struct {
	Stdout           string `json:"stdout"`
	Stderr           string `json:"stderr"`
	StdoutNextOffset int64  `json:"stdout_next_offset"`
	StderrNextOffset int64  `json:"stderr_next_offset"`
	More             bool   `json:"more,omitempty" jsonschema:"true when more output is already there past the next offsets"`
	Note             string `json:"note,omitempty"`
}

// StopInput is stop_process's input.
type StopInput struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Process string `json:"process" jsonschema:"the process id start_process returned"`
	Signal  string `json:"signal,omitempty" jsonschema:"signal name, default SIGTERM (SIGKILL follows after 10 s)"`
}

// ExposeInput is expose_port's input.
type ExposeInput struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Port    int    `json:"port" jsonschema:"TCP port a process listens on inside the sandbox"`
}

// ExposeOutput is expose_port's output.
type ExposeOutput struct {
	URL     string `json:"url" jsonschema:"preview URL that reaches the port; anyone holding it can use it"`
	PathURL string `json:"path_url,omitempty" jsonschema:"the same through a path, for hosts without wildcard DNS"`
}

// SnapshotInput is snapshot_create's input.
type SnapshotInput struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"sandbox id or name; empty means this session's default sandbox"`
	Name    string `json:"name,omitempty" jsonschema:"optional unique name to restore it by"`
	TTL     string `json:"ttl,omitempty" jsonschema:"how long to keep it (Go duration like 72h, or never); default 30 days"`
	Memory  bool   `json:"memory,omitempty" jsonschema:"also keep memory and running processes (gVisor sandboxes without network only): a restore resumes them where they were"`
}

// SnapshotOutput is snapshot_create's output.
type SnapshotOutput struct {
	ID         string `json:"id"`
	Name       string `json:"name,omitempty"`
	Size       int64  `json:"size" jsonschema:"bytes of the snapshot's own changes"`
	MemorySize int64  `json:"memory_size,omitempty" jsonschema:"bytes of its memory image, for a snapshot with memory"`
}

// RestoreInput is snapshot_restore's input.
type RestoreInput struct {
	Snapshot string `json:"snapshot" jsonschema:"snapshot id or name"`
	Name     string `json:"name,omitempty" jsonschema:"optional name for the new sandbox"`
}

func (s *Server) addProcessTools() {
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "start_process",
		Title: "Start a background process",
		Description: `Start a long-running process (a dev server, a watcher, a database) in the background and return at once with its id; its output is kept (1 MiB per stream) for process_logs.
Use exec instead for commands that finish. With wait_for_port, it returns once the server accepts connections (then use expose_port to reach it from outside).`,
		Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, s.startProcess)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "process_logs",
		Title:       "Read a background process's output",
		Description: `Read what a background process printed, from byte offsets, 16 KiB per stream per call; read on with the returned next offsets. Also returns nothing new quickly when the process is quiet. Cheap.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.processLogs)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "stop_process",
		Title:       "Stop a background process",
		Description: `Stop a background process (SIGTERM, then SIGKILL after 10 s) and return its final status.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.stopProcess)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "expose_port",
		Title: "Get a preview URL for a port",
		Description: `Make a TCP port inside the sandbox reachable from outside through a preview URL, and return it (works even though the sandbox has no network). Anyone holding the URL can reach the port: share it only with the user.
Start the server first (start_process with wait_for_port).`,
		Annotations: &mcpsdk.ToolAnnotations{IdempotentHint: true, OpenWorldHint: ptr(true)},
	}, s.exposePort)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "snapshot_create",
		Title: "Snapshot a sandbox's files",
		Description: `Save the sandbox's whole filesystem as a snapshot. Takes about as long as copying the files changed since the image. Restore it later with snapshot_restore, e.g. before a risky change or to keep work past this session.
Processes and memory are kept only with memory: true, for gVisor sandboxes without network (the sandbox pauses for about half a second); a restore then resumes every process where it was.`,
		Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, s.snapshotCreate)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "snapshot_restore",
		Title:       "Restore a snapshot into a new sandbox",
		Description: `Create a new sandbox whose files are those of a snapshot (and, for one taken with memory, its memory and running processes), and return it. The new sandbox outlives this session: pass its id as sandbox to other tools, and destroy it with sandbox_destroy when done.`,
		Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, s.snapshotRestore)
}

func (s *Server) startProcess(ctx context.Context, req *mcpsdk.CallToolRequest, in StartProcessInput) (*mcpsdk.CallToolResult, ProcessOutput, error) {
	switch {
	case strings.TrimSpace(in.Command) == "":
		return nil, ProcessOutput{}, errors.New("command is empty; give the shell command line of the process, e.g. python3 -m http.server 8000")
	case len(in.Command) > maxCommandBytes:
		return nil, ProcessOutput{}, fmt.Errorf("command is %d bytes, at most %d; write a script with write_file and start it", len(in.Command), maxCommandBytes)
	case in.WaitForPort < 0 || in.WaitForPort > 65535:
		return nil, ProcessOutput{}, fmt.Errorf("wait_for_port %d: want 1 to 65535", in.WaitForPort)
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, ProcessOutput{}, err
	}
	p, err := s.c.StartProcess(ctx, id, api.StartProcessRequest{ID: in.ID, Cmd: []string{"/bin/sh", "-c", in.Command}, Cwd: in.Cwd, Env: in.Env})
	if err != nil {
		return nil, ProcessOutput{}, toolError("start_process failed", err)
	}
	if in.WaitForPort > 0 {
		w, err := s.c.WaitPort(ctx, id, p.ID, in.WaitForPort, 60*time.Second)
		if err != nil {
			return nil, ProcessOutput{}, toolError(fmt.Sprintf("process %s started but port %d did not open (read its output with process_logs)", p.ID, in.WaitForPort), err)
		}
		p = &w.Process
	}
	return nil, ProcessOutput{Process: processInfo(p, id)}, nil
}

func (s *Server) processLogs(ctx context.Context, req *mcpsdk.CallToolRequest, in LogsInput) (*mcpsdk.CallToolResult, LogsOutput, error) {
	if in.Process == "" || in.StdoutOffset < 0 || in.StderrOffset < 0 {
		return nil, LogsOutput{}, errors.New("give process (the id start_process returned) and non-negative offsets")
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, LogsOutput{}, err
	}
	var out LogsOutput
	for _, st := range []struct {
		name   string
		offset int64
		text   *string
		next   *int64
	}{{"stdout", in.StdoutOffset, &out.Stdout, &out.StdoutNextOffset}, {"stderr", in.StderrOffset, &out.Stderr, &out.StderrNextOffset}} {
		w := &prefixWriter{n: maxLogChunk}
		opts := paddock.LogsOptions{Stream: st.name, Offset: st.offset}
		if st.name == "stdout" {
			opts.Stdout = w
		} else {
			opts.Stderr = w
		}
		res, err := s.c.ProcessLogs(ctx, id, in.Process, opts)
		if err != nil {
			return nil, LogsOutput{}, toolError("process_logs failed", err)
		}
		kept := string(w.buf)
		if w.total > int64(len(kept)) {
			kept = trimPartialRune(kept)
		}
		*st.text = validUTF8(kept)
		*st.next = st.offset + int64(len(kept)) + res.Dropped
		if w.total > int64(len(kept)) {
			out.More = true
		}
		if res.Dropped > 0 {
			out.Note = strings.TrimSpace(out.Note + fmt.Sprintf(" %d bytes of %s before the offset were no longer kept.", res.Dropped, st.name))
		}
	}
	if out.More {
		out.Note = strings.TrimSpace(out.Note + " More output follows: call again with the next offsets.")
	}
	return nil, out, nil
}

// trimPartialRune drops a multi-byte rune cut off at the end of s, so the
// next offset starts at its first byte.
func trimPartialRune(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			break
		}
	}
	return s
}

// prefixWriter keeps the first n bytes written and counts the rest.
type prefixWriter struct {
	n     int
	buf   []byte
	total int64
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if room := w.n - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (s *Server) stopProcess(ctx context.Context, req *mcpsdk.CallToolRequest, in StopInput) (*mcpsdk.CallToolResult, ProcessOutput, error) {
	if in.Process == "" {
		return nil, ProcessOutput{}, errors.New("give process, the id start_process returned")
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, ProcessOutput{}, err
	}
	p, err := s.c.KillProcess(ctx, id, in.Process, api.KillProcessRequest{Signal: in.Signal})
	if err != nil {
		return nil, ProcessOutput{}, toolError("stop_process failed", err)
	}
	return nil, ProcessOutput{Process: processInfo(p, id)}, nil
}

func (s *Server) exposePort(ctx context.Context, req *mcpsdk.CallToolRequest, in ExposeInput) (*mcpsdk.CallToolResult, ExposeOutput, error) {
	if in.Port < 1 || in.Port > 65535 {
		return nil, ExposeOutput{}, fmt.Errorf("port %d: want 1 to 65535", in.Port)
	}
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, ExposeOutput{}, err
	}
	p, err := s.c.Expose(ctx, id, in.Port)
	if err != nil {
		return nil, ExposeOutput{}, toolError("expose_port failed", err)
	}
	return nil, ExposeOutput{URL: p.URL, PathURL: p.PathURL}, nil
}

func (s *Server) snapshotCreate(ctx context.Context, req *mcpsdk.CallToolRequest, in SnapshotInput) (*mcpsdk.CallToolResult, SnapshotOutput, error) {
	id, err := s.resolve(ctx, req, in.Sandbox)
	if err != nil {
		return nil, SnapshotOutput{}, err
	}
	sn, err := s.c.CreateSnapshot(ctx, id, api.CreateSnapshotRequest{Name: in.Name, TTL: in.TTL, Memory: in.Memory})
	if err != nil {
		return nil, SnapshotOutput{}, toolError("snapshot_create failed", err)
	}
	return nil, SnapshotOutput{ID: sn.ID, Name: sn.Name, Size: sn.Size, MemorySize: sn.MemorySize}, nil
}

func (s *Server) snapshotRestore(ctx context.Context, req *mcpsdk.CallToolRequest, in RestoreInput) (*mcpsdk.CallToolResult, SandboxOutput, error) {
	if in.Snapshot == "" || len(in.Snapshot) > 256 {
		return nil, SandboxOutput{}, errors.New("give snapshot, the id or name snapshot_create returned")
	}
	sb, err := s.c.Create(ctx, api.CreateSandboxRequest{Name: in.Name, FromSnapshot: in.Snapshot})
	if err != nil {
		return nil, SandboxOutput{}, toolError("snapshot_restore failed", err)
	}
	return nil, SandboxOutput{Sandbox: info(sb, s.defaultOf(req))}, nil
}
