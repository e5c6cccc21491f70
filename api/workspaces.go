package api

import "time"

// Workspace executors: where a command of POST /v1/workspaces/{id}/run
// runs. ExecutorShell is a POSIX shell interpreted inside the daemon with
// the common tools built in, over the workspace's files and nothing else;
// ExecutorJS a JavaScript program (goja, with Node's fs and path over
// the workspace) in a child process of the daemon: the script is its
// source, or the command names a program file of the workspace and its
// arguments; ExecutorContainer a sandbox holding a copy of the workspace
// at /workspace, attached on first use and removed when idle;
// ExecutorAuto picks the cheapest executor that can run shell text (shell
// or container, never js) and says why in the result.
const (
	ExecutorShell     = "shell"
	ExecutorJS        = "js"
	ExecutorContainer = "container"
	ExecutorAuto      = "auto"
)

// Workspace is a named filesystem whose canonical copy the daemon keeps,
// with every change recorded as a version.
type Workspace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// CreatedBy owns it: the API key id that made it, CallerLocal for the
	// unix socket.
	CreatedBy string `json:"created_by,omitempty"`
	// Version is the current version: 0 for a new, empty workspace, one
	// more for each command that changed something (and each rollback).
	Version int64 `json:"version"`
	// Bytes and Files are what the current version holds (files and
	// directories); MaxBytes and MaxFiles its quota.
	Bytes    int64 `json:"bytes"`
	Files    int64 `json:"files"`
	MaxBytes int64 `json:"max_bytes"`
	MaxFiles int64 `json:"max_files"`
	// UpdatedAt is when the current version was made.
	UpdatedAt time.Time `json:"updated_at"`
	// OldestVersion is the oldest version kept: 0 until the history's
	// contents passed four times MaxBytes and older versions were pruned.
	OldestVersion int64 `json:"oldest_version"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []Workspace `json:"workspaces"`
}

// CreateWorkspaceRequest is the body of POST /v1/workspaces. A quota of 0
// takes the daemon's default.
type CreateWorkspaceRequest struct {
	Name     string `json:"name"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
	MaxFiles int64  `json:"max_files,omitempty"`
}

// WorkspaceRunRequest is the body of POST /v1/workspaces/{id}/run: one
// command (Command as argv, or Script as shell text; exactly one) run in
// the workspace by Executor (default auto).
type WorkspaceRunRequest struct {
	Command  []string          `json:"command,omitempty"`
	Script   string            `json:"script,omitempty"`
	Executor string            `json:"executor,omitempty"`
	Stdin    string            `json:"stdin,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	// Cwd is a directory of the workspace, relative to its root.
	Cwd string `json:"cwd,omitempty"`
	// TimeoutMs bounds the command (default 30 s, at most 10 min).
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}

// WorkspaceRunResult is what a workspace command did. Its changes land
// whole, as one new version, when it ends by itself (whatever its exit
// code); a command the executor stopped (Stopped) or that conflicts with
// a concurrent one changes nothing.
type WorkspaceRunResult struct {
	Executor string `json:"executor"`
	// Reason says why auto chose Executor.
	Reason   string `json:"reason,omitempty"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Stopped says why the executor stopped the command: "timeout",
	// "output limit" or "memory limit".
	Stopped string `json:"stopped,omitempty"`
	// BaseVersion is the version the command saw; Version the one it
	// made, or BaseVersion when it changed nothing.
	BaseVersion int64 `json:"base_version"`
	Version     int64 `json:"version"`
	// Changes are the paths it changed.
	Changes    []WorkspaceChange `json:"changes,omitempty"`
	DurationMs float64           `json:"duration_ms"`
}

// Kinds of WorkspaceChange.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeRemoved  = "removed"
)

// WorkspaceChange is one path that differs between two versions.
type WorkspaceChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Dir  bool   `json:"dir,omitempty"`
}

// WorkspaceVersion is one entry of a workspace's history: the command
// that made it.
type WorkspaceVersion struct {
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	// CreatedBy is the caller whose command made it.
	CreatedBy string `json:"created_by,omitempty"`
	Executor  string `json:"executor,omitempty"`
	Command   string `json:"command"`
	ExitCode  int    `json:"exit_code"`
	Added     int    `json:"added"`
	Modified  int    `json:"modified"`
	Removed   int    `json:"removed"`
}

// WorkspaceHistory is the body of GET /v1/workspaces/{id}/versions,
// newest first.
type WorkspaceHistory struct {
	Versions []WorkspaceVersion `json:"versions"`
}

// WorkspaceDiff is the body of GET /v1/workspaces/{id}/diff?from=A&to=B:
// the paths that differ between two versions.
type WorkspaceDiff struct {
	From    int64             `json:"from"`
	To      int64             `json:"to"`
	Changes []WorkspaceChange `json:"changes"`
}

// WorkspaceRollbackRequest is the body of POST
// /v1/workspaces/{id}/rollback: make a new version whose files are those
// of Version (history is kept: the rollback is itself a version).
type WorkspaceRollbackRequest struct {
	Version int64 `json:"version"`
}

// WorkspacePruneRequest is the body of POST /v1/workspaces/{id}/prune:
// drop the versions before Before (the current version is always kept).
type WorkspacePruneRequest struct {
	Before int64 `json:"before"`
}

// WorkspacePruneResult says what a prune dropped: Oldest is the oldest
// version kept now, Versions how many were dropped, FreedBytes the bytes
// of contents no version holds any more.
type WorkspacePruneResult struct {
	Oldest     int64 `json:"oldest"`
	Versions   int64 `json:"versions"`
	FreedBytes int64 `json:"freed_bytes"`
}

// Headers of GET /v1/workspaces/{id}/files: the version the file was read
// from, and its permission bits in octal.
const (
	WorkspaceVersionHeader = "X-Paddock-Workspace-Version"
	FileModeHeader         = "X-Paddock-File-Mode"
)

// WorkspaceCommand is one entry of a workspace's ledger: a command run in
// it, or a file written through the file routes (executor "files"),
// whether it changed files or not.
type WorkspaceCommand struct {
	Seq      int64     `json:"seq"`
	At       time.Time `json:"at"`
	Caller   string    `json:"caller,omitempty"`
	Executor string    `json:"executor"`
	// Reason is why auto chose the executor.
	Reason     string  `json:"reason,omitempty"`
	Command    string  `json:"command"`
	ExitCode   int     `json:"exit_code"`
	DurationMs float64 `json:"duration_ms"`
	// BaseVersion is the version the command saw; Version the one its
	// changes landed as, equal to BaseVersion when it changed nothing or
	// nothing of it was kept.
	BaseVersion int64 `json:"base_version"`
	Version     int64 `json:"version"`
	// Stopped says which bound stopped it (nothing of it was kept).
	Stopped string `json:"stopped,omitempty"`
	// Error says why its changes did not land although it ran whole (a
	// concurrent command changed the same path, the quota).
	Error string `json:"error,omitempty"`
}

// WorkspaceLedger is the body of GET /v1/workspaces/{id}/ledger: entries
// oldest first. When Next is set there are more; ask again with
// ?after=Next.
type WorkspaceLedger struct {
	Entries []WorkspaceCommand `json:"entries"`
	Next    int64              `json:"next,omitempty"`
}
