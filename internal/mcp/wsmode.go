package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// Workspace mode: with Options.Workspace set, a session works in one
// workspace instead of sandboxes. The tools are the sandbox mode's file
// tools and a run tool, all bound to that workspace, which is created on
// first use when it does not exist and is never deleted by this package.
//
// The file tools are small JavaScript programs run by the workspace's js
// executor, their arguments given as JSON on standard input: each reads,
// checks and writes in one command, so an edit lands whole as one version
// or not at all, and a concurrent command that touched the same file makes
// it fail rather than be overwritten. Each program starts with a comment
// naming the tool, which is what the workspace's history shows first.

const wsInstructions = `This session works in one Paddock workspace: a set of files Paddock keeps, with a version for every change (history, diff, rollback), seen at /workspace.
Use read_file/write_file/edit_file/list_dir for files (paths relative to the workspace root, or absolute under /workspace), run for commands.
run picks the cheapest executor that can run a command: an in-process shell (common tools, under a millisecond), or a Linux container (python3, git, ...) when the command needs a program the shell does not have.
Outputs are bounded: when a result says it was truncated, narrow the request (line ranges, a more specific pattern, a subdirectory).`

// WsRunInput is run's input in workspace mode.
type WsRunInput struct {
	Command        string            `json:"command" jsonschema:"shell text: pipes, redirections, &&, loops and here-documents work"`
	Executor       string            `json:"executor,omitempty" jsonschema:"auto (default: the cheapest executor that can run the command), shell, js (command is JavaScript source) or container"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"directory of the workspace to start in, relative to its root; default the root (/workspace)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this command"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text fed to the command's standard input (at most 1 MiB)"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"stop the command after this many seconds; default 30, at most 600"`
}

// WsReadInput is read_file's input in workspace mode.
type WsReadInput struct {
	Path   string `json:"path" jsonschema:"file path, relative to the workspace root"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to return, 1-based; default 1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to return; default 2000"`
}

// WsWriteInput is write_file's input in workspace mode.
type WsWriteInput struct {
	Path       string `json:"path" jsonschema:"file path, relative to the workspace root; missing parent directories are created"`
	Content    string `json:"content" jsonschema:"the whole new content of the file (at most 2 MiB)"`
	Executable bool   `json:"executable,omitempty" jsonschema:"make the file executable (mode 0755)"`
}

// WsWriteOutput is write_file's output in workspace mode.
type WsWriteOutput struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Version int64  `json:"version" jsonschema:"the workspace's version after the write"`
}

// WsEditInput is edit_file's input in workspace mode.
type WsEditInput struct {
	Path       string `json:"path" jsonschema:"file path, relative to the workspace root"`
	OldString  string `json:"old_string" jsonschema:"exact text to replace, including whitespace and indentation; must occur exactly once unless replace_all"`
	NewString  string `json:"new_string" jsonschema:"the replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence instead of requiring exactly one"`
}

// WsEditOutput is edit_file's output in workspace mode.
type WsEditOutput struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Version      int64  `json:"version" jsonschema:"the workspace's version after the edit"`
}

// WsListDirInput is list_dir's input in workspace mode.
type WsListDirInput struct {
	Path string `json:"path,omitempty" jsonschema:"directory, relative to the workspace root; default the root"`
}

// WsDiffInput is diff's input in workspace mode.
type WsDiffInput struct {
	From *int64 `json:"from,omitempty" jsonschema:"older version; default the one before to"`
	To   *int64 `json:"to,omitempty" jsonschema:"newer version; default the current one"`
}

// WsRollbackInput is rollback's input in workspace mode.
type WsRollbackInput struct {
	Version int64 `json:"version" jsonschema:"the version whose files to bring back"`
}

func (s *Server) addWorkspaceModeTools() {
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "run",
		Title:       "Run a command in the workspace",
		Description: runDescription,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcpsdk.CallToolRequest, in WsRunInput) (*mcpsdk.CallToolResult, WorkspaceRunOutput, error) {
		if err := s.ensureWorkspace(ctx); err != nil {
			return nil, WorkspaceRunOutput{}, err
		}
		return s.workspaceRun(ctx, req, WorkspaceRunInput{Workspace: s.opts.Workspace, Command: in.Command, Executor: in.Executor,
			Cwd: in.Cwd, Env: in.Env, Stdin: in.Stdin, TimeoutSeconds: in.TimeoutSeconds})
	})
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "read_file",
		Title: "Read a text file",
		Description: `Read a text file of the workspace, optionally a range of lines (offset, limit). Cheap.
Returns at most 2000 lines and 64 KiB per call; when truncated is true, call again with offset=end_line+1. Lines longer than 2000 characters are cut.
Binary files are refused: inspect them with run (e.g. od -c FILE | head). Files over 8 MiB are refused: search them with grep, or show a part with sed -n.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.wsReadFile)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "write_file",
		Title: "Write a file",
		Description: `Create or replace a file of the workspace with the given content, creating missing parent directories. Cheap; makes one version.
Replaces the whole file: to change part of an existing file, prefer edit_file.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, s.wsWriteFile)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "edit_file",
		Title: "Edit a file by exact replacement",
		Description: `Replace an exact piece of text in a file of the workspace with new text. old_string must match the file byte for byte (whitespace and indentation included) and occur exactly once; otherwise nothing is changed and the error says how many times it occurred, so include more surrounding lines to make it unique (or set replace_all).
The edit lands whole as one version, or not at all. Read the file with read_file first to copy the text exactly.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.wsEditFile)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "list_dir",
		Title:       "List a directory",
		Description: `List the entries of one directory of the workspace (not recursive) with their type, size, mode and modification time. Cheap; at most 500 entries. Use run with find to search a tree.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.wsListDir)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "history",
		Title:       "The workspace's history",
		Description: `List the workspace's versions, newest first: each with the command (or file tool) that made it, its exit code and how many paths it added, modified and removed.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, WorkspaceHistoryOutput, error) {
		if err := s.ensureWorkspace(ctx); err != nil {
			return nil, WorkspaceHistoryOutput{}, err
		}
		return s.workspaceHistory(ctx, req, WorkspaceRefInput{Workspace: s.opts.Workspace})
	})
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "diff",
		Title:       "Compare two versions",
		Description: `List the paths that differ between two versions of the workspace (default: what the last version changed).`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcpsdk.CallToolRequest, in WsDiffInput) (*mcpsdk.CallToolResult, WorkspaceDiffOutput, error) {
		if err := s.ensureWorkspace(ctx); err != nil {
			return nil, WorkspaceDiffOutput{}, err
		}
		return s.workspaceDiff(ctx, req, WorkspaceDiffInput{Workspace: s.opts.Workspace, From: in.From, To: in.To})
	})
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "rollback",
		Title:       "Bring back an earlier version",
		Description: `Make a new version of the workspace whose files are exactly those of an earlier version. Nothing is lost: the versions in between stay in the history, and a rollback can itself be rolled back.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcpsdk.CallToolRequest, in WsRollbackInput) (*mcpsdk.CallToolResult, WorkspaceRollbackOutput, error) {
		if err := s.ensureWorkspace(ctx); err != nil {
			return nil, WorkspaceRollbackOutput{}, err
		}
		return s.workspaceRollback(ctx, req, WorkspaceRollbackInput{Workspace: s.opts.Workspace, Version: in.Version})
	})
}

// ensureWorkspace makes sure the session's workspace exists, creating it
// the first time it is missing. A workspace removed later is made again
// on the next call.
func (s *Server) ensureWorkspace(ctx context.Context) error {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	if s.wsReady {
		return nil
	}
	_, err := s.c.GetWorkspace(ctx, s.opts.Workspace)
	if errors.Is(err, paddock.ErrNotFound) {
		_, err = s.c.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: s.opts.Workspace})
		if errors.Is(err, paddock.ErrConflict) {
			// Made meanwhile by another client.
			_, err = s.c.GetWorkspace(ctx, s.opts.Workspace)
		}
		if err == nil {
			s.log.Info("created the workspace of an MCP session", "workspace", s.opts.Workspace)
		}
	}
	if err != nil {
		return toolError(fmt.Sprintf("workspace %q could not be opened or made", s.opts.Workspace), err)
	}
	s.wsReady = true
	return nil
}

// wsProgram runs one of the file tools' programs on the js executor with
// args as its standard input, and decodes what it printed into out.
func (s *Server) wsProgram(ctx context.Context, tool, program string, args, out any) (*api.WorkspaceRunResult, error) {
	if err := s.ensureWorkspace(ctx); err != nil {
		return nil, err
	}
	stdin, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	res, err := s.c.RunInWorkspace(ctx, s.opts.Workspace, api.WorkspaceRunRequest{
		Script: program, Executor: api.ExecutorJS, Stdin: string(stdin), TimeoutMs: (60 * time.Second).Milliseconds(),
	})
	if errors.Is(err, paddock.ErrNotFound) {
		s.wsMu.Lock()
		s.wsReady = false
		s.wsMu.Unlock()
	}
	if err != nil {
		return nil, toolError(tool+" failed (nothing was changed)", err)
	}
	if res.Stopped != "" {
		return nil, fmt.Errorf("%s was stopped (%s); nothing was changed", tool, res.Stopped)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("%s failed: %s", tool, programError(res.Stderr))
	}
	if err := json.Unmarshal([]byte(res.Stdout), out); err != nil {
		return nil, fmt.Errorf("%s: unreadable answer from the workspace: %v", tool, err)
	}
	return res, nil
}

// programError turns what an uncaught exception printed into one line.
func programError(stderr string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	line = strings.TrimPrefix(line, "Uncaught ")
	line = strings.TrimPrefix(line, "Error: ")
	if line == "" {
		return "the workspace program failed without a message"
	}
	return cutRunes(line, 1000)
}

// wsPath is a tool's path as the programs take it: relative paths start at
// the workspace's root, which is their working directory.
func wsPath(what, p string) (string, error) {
	if err := checkPath(what, p); err != nil {
		return "", err
	}
	return p, nil
}

const wsReadProgram = `// read_file (MCP)
const fs = require('fs');
const a = JSON.parse(fs.readFileSync(0));
const st = fs.statSync(a.path);
if (st.isDirectory()) throw new Error(a.path + ' is a directory; list it with list_dir');
if (st.size > a.max) {
  console.log(JSON.stringify({size: st.size, too_large: true}));
} else {
  const t = fs.readFileSync(a.path);
  let n = 0, i = 0, size = 0;
  const got = [];
  while (i < t.length) {
    let j = t.indexOf('\n', i);
    j = j < 0 ? t.length : j + 1;
    n++;
    if (n >= a.offset && n < a.offset + a.limit && size <= a.chars) {
      let l = t.slice(i, j);
      if (l.length > a.line) l = l.slice(0, a.line) + (l.endsWith('\n') ? '\n' : '');
      got.push(l);
      size += l.length;
    }
    i = j;
  }
  console.log(JSON.stringify({size: st.size, total: n, text: got.join(''),
    binary: t.slice(0, 8192).indexOf('\0') >= 0, not_utf8: t.indexOf('\uFFFD') >= 0}));
}
`

type wsReadAnswer struct {
	Size     int64  `json:"size"`
	TooLarge bool   `json:"too_large"`
	Total    int    `json:"total"`
	Text     string `json:"text"`
	Binary   bool   `json:"binary"`
	NotUTF8  bool   `json:"not_utf8"`
}

func (s *Server) wsReadFile(ctx context.Context, _ *mcpsdk.CallToolRequest, in WsReadInput) (*mcpsdk.CallToolResult, ReadOutput, error) {
	p, err := wsPath("path", in.Path)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	if in.Offset < 0 || in.Limit < 0 {
		return nil, ReadOutput{}, errors.New("offset and limit must not be negative (offset is 1-based)")
	}
	offset, limit := max(in.Offset, 1), in.Limit
	if limit == 0 {
		limit = 2000
	}
	var a wsReadAnswer
	// The program returns the window, each line cut to a little more than
	// read_file shows, and a little more text than it shows, so that the
	// bounds below (the same as in sandbox mode) see what they must cut.
	if _, err := s.wsProgram(ctx, "read_file", wsReadProgram, map[string]any{
		"path": p, "offset": offset, "limit": limit, "max": maxReadBytes, "chars": maxReadChars + 2*maxLineChars, "line": 2*maxLineChars + 1,
	}, &a); err != nil {
		return nil, ReadOutput{}, err
	}
	switch {
	case a.TooLarge:
		return nil, ReadOutput{}, fmt.Errorf("%s is larger than %d MiB (%d bytes); search it with grep, or show a part with run (sed -n '100,200p' FILE)", p, maxReadBytes>>20, a.Size)
	case a.Binary:
		return nil, ReadOutput{}, fmt.Errorf("%s looks binary (%d bytes, contains NUL bytes); inspect it with run, e.g. od -c %s | head", p, a.Size, p)
	}
	r := sliceLines(a.Text, 1, limit, maxReadChars)
	r.start, r.end, r.total = offset, offset-1+r.end, a.Total
	out := readOutput(p, r)
	if a.NotUTF8 {
		out.Note = strings.TrimSpace(out.Note + " The file is not all UTF-8 text: bytes that are not show as U+FFFD.")
	}
	return nil, out, nil
}

const wsWriteProgram = `// write_file (MCP)
const fs = require('fs'), path = require('path');
const a = JSON.parse(fs.readFileSync(0));
fs.mkdirSync(path.dirname(path.resolve(a.path)), {recursive: true});
fs.writeFileSync(a.path, a.content);
fs.chmodSync(a.path, a.mode);
console.log(JSON.stringify({path: path.resolve(a.path)}));
`

func (s *Server) wsWriteFile(ctx context.Context, _ *mcpsdk.CallToolRequest, in WsWriteInput) (*mcpsdk.CallToolResult, WsWriteOutput, error) {
	p, err := wsPath("path", in.Path)
	if err != nil {
		return nil, WsWriteOutput{}, err
	}
	if len(in.Content) > maxWriteBytes {
		return nil, WsWriteOutput{}, fmt.Errorf("content is %d bytes, at most %d per call; write the file in parts (write_file, then run cat part2 >> file)", len(in.Content), maxWriteBytes)
	}
	mode := 0o644
	if in.Executable {
		mode = 0o755
	}
	var a struct {
		Path string `json:"path"`
	}
	res, err := s.wsProgram(ctx, "write_file", wsWriteProgram, map[string]any{"path": p, "content": in.Content, "mode": mode}, &a)
	if err != nil {
		return nil, WsWriteOutput{}, err
	}
	return nil, WsWriteOutput{Path: a.Path, Bytes: len(in.Content), Version: res.Version}, nil
}

const wsEditProgram = `// edit_file (MCP)
const fs = require('fs');
const a = JSON.parse(fs.readFileSync(0));
const st = fs.statSync(a.path);
if (st.isDirectory()) throw new Error(a.path + ' is a directory, not a regular file');
if (st.size > a.max) throw new Error(a.path + ' is larger than ' + (a.max >> 20) + ' MiB; edit it with run (sed -i)');
const t = fs.readFileSync(a.path);
if (t.indexOf('\0') >= 0) throw new Error(a.path + ' looks binary (contains NUL bytes); nothing was changed');
if (t.indexOf('\uFFFD') >= 0) throw new Error(a.path + ' is not all UTF-8 text; edit it with run (sed -i); nothing was changed');
const parts = t.split(a.old);
const n = parts.length - 1;
if (n === 0) {
  console.log(JSON.stringify({count: 0, trimmed: a.old.trim() !== '' && t.indexOf(a.old.trim()) >= 0}));
} else if (n > 1 && !a.all) {
  console.log(JSON.stringify({count: n}));
} else {
  const out = a.all ? parts.join(a.new) : parts[0] + a.new + parts.slice(1).join(a.old);
  if (out.length > a.max) throw new Error('the edited file would be over ' + (a.max >> 20) + ' MiB; nothing was changed');
  fs.writeFileSync(a.path, out);
  console.log(JSON.stringify({count: n, done: true}));
}
`

func (s *Server) wsEditFile(ctx context.Context, _ *mcpsdk.CallToolRequest, in WsEditInput) (*mcpsdk.CallToolResult, WsEditOutput, error) {
	p, err := wsPath("path", in.Path)
	if err != nil {
		return nil, WsEditOutput{}, err
	}
	switch {
	case in.OldString == "":
		return nil, WsEditOutput{}, errors.New("old_string is empty; give the exact text to replace (use write_file to create a file)")
	case in.OldString == in.NewString:
		return nil, WsEditOutput{}, errors.New("old_string and new_string are the same; nothing to change")
	case len(in.OldString)+len(in.NewString) > maxWriteBytes:
		return nil, WsEditOutput{}, fmt.Errorf("old_string and new_string are %d bytes together, at most %d; use write_file for a whole new file", len(in.OldString)+len(in.NewString), maxWriteBytes)
	}
	var a struct {
		Count   int  `json:"count"`
		Trimmed bool `json:"trimmed"`
		Done    bool `json:"done"`
	}
	res, err := s.wsProgram(ctx, "edit_file", wsEditProgram, map[string]any{"path": p, "old": in.OldString, "new": in.NewString, "all": in.ReplaceAll, "max": maxReadBytes}, &a)
	if err != nil {
		return nil, WsEditOutput{}, err
	}
	if !a.Done {
		return nil, WsEditOutput{}, editRefusal(p, a.Count, a.Trimmed)
	}
	return nil, WsEditOutput{Path: p, Replacements: a.Count, Version: res.Version}, nil
}

const wsListProgram = `// list_dir (MCP)
const fs = require('fs'), path = require('path');
const a = JSON.parse(fs.readFileSync(0));
const names = fs.readdirSync(a.path).sort();
const entries = [];
for (const name of names.slice(0, a.max)) {
  const st = fs.statSync(path.join(a.path, name));
  entries.push({name: name, dir: st.isDirectory(), size: st.size, mode: st.mode, mtime: st.mtimeMs});
}
console.log(JSON.stringify({path: path.resolve(a.path), total: names.length, entries: entries}));
`

func (s *Server) wsListDir(ctx context.Context, _ *mcpsdk.CallToolRequest, in WsListDirInput) (*mcpsdk.CallToolResult, ListDirOutput, error) {
	p := in.Path
	if p == "" {
		p = "."
	}
	p, err := wsPath("path", p)
	if err != nil {
		return nil, ListDirOutput{}, err
	}
	var a struct {
		Path    string `json:"path"`
		Total   int    `json:"total"`
		Entries []struct {
			Name  string `json:"name"`
			Dir   bool   `json:"dir"`
			Size  int64  `json:"size"`
			Mode  uint32 `json:"mode"`
			Mtime int64  `json:"mtime"`
		} `json:"entries"`
	}
	if _, err := s.wsProgram(ctx, "list_dir", wsListProgram, map[string]any{"path": p, "max": maxListEntries}, &a); err != nil {
		return nil, ListDirOutput{}, err
	}
	out := ListDirOutput{Path: a.Path, Entries: make([]DirEntry, 0, len(a.Entries))}
	for _, e := range a.Entries {
		typ := "file"
		if e.Dir {
			typ = "dir"
		}
		out.Entries = append(out.Entries, DirEntry{Name: validUTF8(e.Name), Type: typ, Size: e.Size,
			Mode: fmt.Sprintf("%04o", e.Mode&0o7777), ModifiedAt: time.UnixMilli(e.Mtime).UTC()})
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Name < out.Entries[j].Name })
	switch {
	case a.Total > len(a.Entries):
		out.Note = fmt.Sprintf("showing %d of %d entries; use run with find and a pattern to narrow", len(a.Entries), a.Total)
	case a.Total == 0:
		out.Note = "the directory is empty"
	}
	return nil, out, nil
}

// maxWorkspaceServers bounds the workspace-mode servers a
// WorkspaceHTTPHandler keeps, one per workspace named; sessions on
// workspaces past it get a server of their own.
const maxWorkspaceServers = 64

// CheckWorkspaceRef refuses a workspace reference the API could never
// accept, with a message a client can act on.
func CheckWorkspaceRef(ref string) error { return checkWorkspace(ref) }

// WorkspaceHTTPHandler serves workspace-mode sessions over streamable
// HTTP: each session works in the workspace that workspace(r) names for
// the request that starts it (opts.Workspace is ignored). The caller
// checks the name (CheckWorkspaceRef) and mounts the handler behind the
// API's authentication.
func WorkspaceHTTPHandler(opts Options, workspace func(*http.Request) string) http.Handler {
	var (
		mu      sync.Mutex
		servers = map[string]*Server{}
	)
	get := func(r *http.Request) *mcpsdk.Server {
		name := workspace(r)
		if checkWorkspace(name) != nil {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if s, ok := servers[name]; ok {
			return s.srv
		}
		o := opts
		o.Workspace = name
		s := New(o)
		if len(servers) < maxWorkspaceServers {
			servers[name] = s
		}
		return s.srv
	}
	timeout := opts.SessionTimeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	return mcpsdk.NewStreamableHTTPHandler(get, &mcpsdk.StreamableHTTPOptions{Logger: opts.Logger, SessionTimeout: timeout})
}
