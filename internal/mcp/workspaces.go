package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-dev/paddock/api"
)

// ShellTools are the commands the shell executor has built in, as the
// workspace_run tool tells a model (a test holds the list to the
// executor's).
var ShellTools = []string{
	"basename", "cat", "chmod", "cp", "cut", "diff", "dirname", "echo", "env", "find", "grep", "head", "ls",
	"mkdir", "mv", "nl", "paste", "printf", "rev", "rm", "rmdir", "sed", "seq", "sleep", "sort", "tail",
	"tee", "test", "touch", "tr", "uniq", "wc", "xargs",
}

// WorkspaceInfo is what the tools say about one workspace.
type WorkspaceInfo struct {
	ID      string `json:"id"`
	Name    string `json:"name" jsonschema:"pass it as workspace to workspace_run"`
	Version int64  `json:"version" jsonschema:"the current version; every command that changed files made one"`
	Files   int64  `json:"files"`
	Bytes   int64  `json:"bytes"`
}

func workspaceInfo(w api.Workspace) WorkspaceInfo {
	return WorkspaceInfo{ID: w.ID, Name: w.Name, Version: w.Version, Files: w.Files, Bytes: w.Bytes}
}

// WorkspaceCreateInput is workspace_create's input.
type WorkspaceCreateInput struct {
	Name  string `json:"name" jsonschema:"1-63 letters, digits, '-', '_', '.'"`
	MaxMB int64  `json:"max_mb,omitempty" jsonschema:"quota of file contents in MiB; default 1024"`
}

// WorkspaceOutput wraps one workspace.
type WorkspaceOutput struct {
	Workspace WorkspaceInfo `json:"workspace"`
}

// WorkspaceListOutput is workspace_list's output.
type WorkspaceListOutput struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
	Note       string          `json:"note,omitempty"`
}

// WorkspaceRunInput is workspace_run's input.
type WorkspaceRunInput struct {
	Workspace      string            `json:"workspace" jsonschema:"workspace id or name"`
	Command        string            `json:"command" jsonschema:"shell text: pipes, redirections, &&, loops and here-documents work"`
	Executor       string            `json:"executor,omitempty" jsonschema:"auto (default: the cheapest executor that can run the command), shell, js (command is JavaScript source) or container"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"directory of the workspace to start in, relative to its root; default the root (/workspace)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this command"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"text fed to the command's standard input (at most 1 MiB)"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"stop the command after this many seconds; default 30, at most 600"`
}

// WorkspaceRunOutput is workspace_run's output.
type WorkspaceRunOutput struct {
	ExitCode  int      `json:"exit_code" jsonschema:"the command's exit status; 127 when it runs a command the executor does not have"`
	Stdout    string   `json:"stdout"`
	Stderr    string   `json:"stderr"`
	Truncated bool     `json:"truncated,omitempty" jsonschema:"true when output was cut; the start and end are kept"`
	Executor  string   `json:"executor" jsonschema:"the executor that ran it"`
	Reason    string   `json:"reason,omitempty" jsonschema:"why auto chose that executor"`
	Stopped   string   `json:"stopped,omitempty" jsonschema:"why the executor stopped the command (timeout, output limit, memory limit); nothing it changed was kept"`
	Version   int64    `json:"version" jsonschema:"the workspace's version after the command (unchanged when it changed nothing)"`
	Changed   []string `json:"changed,omitempty" jsonschema:"paths it added (+), modified (~) or removed (-)"`
}

// WorkspaceRefInput names a workspace.
type WorkspaceRefInput struct {
	Workspace string `json:"workspace" jsonschema:"workspace id or name"`
}

// WorkspaceHistoryOutput is workspace_history's output.
type WorkspaceHistoryOutput struct {
	Versions []api.WorkspaceVersion `json:"versions"`
}

// WorkspaceDiffInput is workspace_diff's input.
type WorkspaceDiffInput struct {
	Workspace string `json:"workspace" jsonschema:"workspace id or name"`
	From      *int64 `json:"from,omitempty" jsonschema:"older version; default the one before to"`
	To        *int64 `json:"to,omitempty" jsonschema:"newer version; default the current one"`
}

// WorkspaceDiffOutput is workspace_diff's output.
type WorkspaceDiffOutput struct {
	From    int64    `json:"from"`
	To      int64    `json:"to"`
	Changed []string `json:"changed" jsonschema:"paths added (+), modified (~) or removed (-), directories with a trailing /"`
}

// WorkspaceRollbackInput is workspace_rollback's input.
type WorkspaceRollbackInput struct {
	Workspace string `json:"workspace" jsonschema:"workspace id or name"`
	Version   int64  `json:"version" jsonschema:"the version whose files to bring back"`
}

// WorkspaceRollbackOutput is workspace_rollback's output.
type WorkspaceRollbackOutput struct {
	Version int64    `json:"version" jsonschema:"the new version, whose files are those of the version asked for"`
	Changed []string `json:"changed,omitempty"`
}

func (s *Server) addWorkspaceTools() {
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:  "workspace_create",
		Title: "Create a workspace",
		Description: `Create an empty workspace: a named set of files that Paddock keeps, with every change recorded as a version (see workspace_history, workspace_diff, workspace_rollback).
Work in it with workspace_run. A workspace outlives this session; it needs no sandbox.`,
		Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, s.workspaceCreate)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "workspace_list",
		Title:       "List workspaces",
		Description: `List your workspaces with their current version, number of files and size. Cheap.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.workspaceList)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "workspace_run",
		Title:       "Run a command in a workspace",
		Description: runDescription,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.workspaceRun)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "workspace_history",
		Title:       "A workspace's history",
		Description: `List a workspace's versions, newest first: each with the command that made it, its exit code and how many paths it added, modified and removed.`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.workspaceHistory)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "workspace_diff",
		Title:       "Compare two versions of a workspace",
		Description: `List the paths that differ between two versions of a workspace (default: what the last version changed).`,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, s.workspaceDiff)
	mcpsdk.AddTool(s.srv, &mcpsdk.Tool{
		Name:        "workspace_rollback",
		Title:       "Bring back an earlier version",
		Description: `Make a new version of a workspace whose files are exactly those of an earlier version. Nothing is lost: the versions in between stay in the history, and a rollback can itself be rolled back.`,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, s.workspaceRollback)
}

// runDescription tells a model what workspace_run (and run, in workspace
// mode) does and how to choose an executor.
var runDescription = `Run one shell command over a workspace's files, which it sees at /workspace (its starting directory). What the command changes lands as one new version when it ends by itself, whatever its exit code; a command stopped by a limit changes nothing.
Executors (choose with executor; auto, the default, picks the cheapest that can run the command and says why):
- shell: a POSIX shell interpreted inside Paddock, no container, typically under a millisecond. It has these commands built in, with their common flags: ` + strings.Join(ShellTools, ", ") + `, plus the shell's own (cd, read, export, [, if/for/while, functions). It has no network, no other programs (no python, node, git, make, compilers) and sees only the workspace's files.
- js: a JavaScript program (ES2015+ with async/await, promises and Node's timers) run by an engine inside Paddock, no container, a few milliseconds to start. command is the program's source. It has console, process (argv, env, cwd, exit, exitCode, stdout.write) and require("fs") / require("path") with Node's synchronous file functions (readFileSync, writeFileSync, appendFileSync, readdirSync, statSync, existsSync, mkdirSync, rmSync, renameSync, copyFileSync, ...) and fs.promises over the workspace only; fs.readFileSync(p) returns a string. No other modules, no network, no processes. Use it for data work (parse and rewrite JSON, transform many files) that is awkward in shell. auto never picks js: ask for it.
- container: a Linux sandbox (Debian with python3, bash, git and coreutils; no network) holding a copy of the workspace at /workspace. The first container command of a workspace takes about a second or more (the sandbox starts and the files are copied in); the next ones cost an exec plus reading the copy back. Symlinks are not kept.
auto sends a command to shell when every command it names is built in, else to container. A command that needs a program the shell does not have fails with exit code 127 under shell.
If another command changed the same files while this one ran, this one is refused and nothing of it is kept: run it again.
Output is bounded: the first 4 KiB and last 12 KiB of each stream are kept.`

func checkWorkspace(ref string) error {
	if ref == "" {
		return errors.New("name the workspace (its id or name; see workspace_list, or make one with workspace_create)")
	}
	if len(ref) > 128 || strings.ContainsAny(ref, "/\x00 \n") {
		return fmt.Errorf("workspace %q is not a workspace id or name; use workspace_list to see them", cutRunes(ref, 64))
	}
	return nil
}

func (s *Server) workspaceCreate(ctx context.Context, _ *mcpsdk.CallToolRequest, in WorkspaceCreateInput) (*mcpsdk.CallToolResult, WorkspaceOutput, error) {
	if in.MaxMB < 0 {
		return nil, WorkspaceOutput{}, errors.New("max_mb must not be negative")
	}
	w, err := s.c.CreateWorkspace(ctx, api.CreateWorkspaceRequest{Name: in.Name, MaxBytes: in.MaxMB << 20})
	if err != nil {
		return nil, WorkspaceOutput{}, toolError("workspace_create failed", err)
	}
	return nil, WorkspaceOutput{Workspace: workspaceInfo(*w)}, nil
}

func (s *Server) workspaceList(ctx context.Context, _ *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, WorkspaceListOutput, error) {
	list, err := s.c.ListWorkspaces(ctx)
	if err != nil {
		return nil, WorkspaceListOutput{}, toolError("workspace_list failed", err)
	}
	out := WorkspaceListOutput{Workspaces: make([]WorkspaceInfo, 0, min(len(list), maxListEntries))}
	for _, w := range list {
		if len(out.Workspaces) == maxListEntries {
			out.Note = fmt.Sprintf("showing %d of %d workspaces", maxListEntries, len(list))
			break
		}
		out.Workspaces = append(out.Workspaces, workspaceInfo(w))
	}
	return nil, out, nil
}

func (s *Server) workspaceRun(ctx context.Context, _ *mcpsdk.CallToolRequest, in WorkspaceRunInput) (*mcpsdk.CallToolResult, WorkspaceRunOutput, error) {
	if err := checkWorkspace(in.Workspace); err != nil {
		return nil, WorkspaceRunOutput{}, err
	}
	switch {
	case strings.TrimSpace(in.Command) == "":
		return nil, WorkspaceRunOutput{}, errors.New("command is empty; give shell text, e.g. grep -rn TODO src")
	case len(in.Command) > maxCommandBytes:
		return nil, WorkspaceRunOutput{}, fmt.Errorf("command is %d bytes, at most %d", len(in.Command), maxCommandBytes)
	case len(in.Stdin) > maxStdinBytes:
		return nil, WorkspaceRunOutput{}, fmt.Errorf("stdin is %d bytes, at most %d", len(in.Stdin), maxStdinBytes)
	case in.TimeoutSeconds < 0 || in.TimeoutSeconds > 600:
		return nil, WorkspaceRunOutput{}, fmt.Errorf("timeout_seconds %d: want 1 to 600", in.TimeoutSeconds)
	}
	res, err := s.c.RunInWorkspace(ctx, in.Workspace, api.WorkspaceRunRequest{
		Script: in.Command, Executor: in.Executor, Cwd: in.Cwd, Env: in.Env, Stdin: in.Stdin,
		TimeoutMs: (time.Duration(in.TimeoutSeconds) * time.Second).Milliseconds(),
	})
	if err != nil {
		return nil, WorkspaceRunOutput{}, toolError("workspace_run failed (nothing of the command was kept)", err)
	}
	stdout, stderr := newHeadTail(maxStreamHead, maxStreamTail), newHeadTail(maxStreamHead, maxStreamTail)
	stdout.Write([]byte(res.Stdout))
	stderr.Write([]byte(res.Stderr))
	const hint = "redirect the output to a file of the workspace and search it with grep or read parts with sed -n"
	out := WorkspaceRunOutput{
		ExitCode: res.ExitCode, Stdout: stdout.text(hint), Stderr: stderr.text(hint), Truncated: stdout.truncated() || stderr.truncated(),
		Executor: res.Executor, Reason: res.Reason, Stopped: res.Stopped, Version: res.Version, Changed: changeLines(res.Changes),
	}
	return nil, out, nil
}

// changeLines shows changes as "+ path", "~ path", "- path".
func changeLines(changes []api.WorkspaceChange) []string {
	mark := map[string]string{api.ChangeAdded: "+ ", api.ChangeModified: "~ ", api.ChangeRemoved: "- "}
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		p := c.Path
		if c.Dir {
			p += "/"
		}
		out = append(out, mark[c.Kind]+p)
	}
	return out
}

func (s *Server) workspaceHistory(ctx context.Context, _ *mcpsdk.CallToolRequest, in WorkspaceRefInput) (*mcpsdk.CallToolResult, WorkspaceHistoryOutput, error) {
	if err := checkWorkspace(in.Workspace); err != nil {
		return nil, WorkspaceHistoryOutput{}, err
	}
	list, err := s.c.WorkspaceHistory(ctx, in.Workspace, 100)
	if err != nil {
		return nil, WorkspaceHistoryOutput{}, toolError("workspace_history failed", err)
	}
	return nil, WorkspaceHistoryOutput{Versions: nonNil(list)}, nil
}

func (s *Server) workspaceDiff(ctx context.Context, _ *mcpsdk.CallToolRequest, in WorkspaceDiffInput) (*mcpsdk.CallToolResult, WorkspaceDiffOutput, error) {
	if err := checkWorkspace(in.Workspace); err != nil {
		return nil, WorkspaceDiffOutput{}, err
	}
	from, to := int64(-1), int64(-1)
	if in.From != nil {
		from = *in.From
	}
	if in.To != nil {
		to = *in.To
	}
	d, err := s.c.WorkspaceDiff(ctx, in.Workspace, from, to)
	if err != nil {
		return nil, WorkspaceDiffOutput{}, toolError("workspace_diff failed", err)
	}
	return nil, WorkspaceDiffOutput{From: d.From, To: d.To, Changed: changeLines(d.Changes)}, nil
}

func (s *Server) workspaceRollback(ctx context.Context, _ *mcpsdk.CallToolRequest, in WorkspaceRollbackInput) (*mcpsdk.CallToolResult, WorkspaceRollbackOutput, error) {
	if err := checkWorkspace(in.Workspace); err != nil {
		return nil, WorkspaceRollbackOutput{}, err
	}
	res, err := s.c.RollbackWorkspace(ctx, in.Workspace, in.Version)
	if err != nil {
		return nil, WorkspaceRollbackOutput{}, toolError("workspace_rollback failed", err)
	}
	return nil, WorkspaceRollbackOutput{Version: res.Version, Changed: changeLines(res.Changes)}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
