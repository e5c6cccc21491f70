package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// Workspaces are named filesystems the daemon keeps (internal/workspace);
// here they get what every object gets: an owner, names per owner,
// visibility by scope, and quotas.

// Default and largest quota of a workspace.
const (
	defaultWorkspaceBytes = 1 << 30
	maxWorkspaceBytes     = 64 << 30
	defaultWorkspaceFiles = 100_000
	maxWorkspaceFiles     = 10_000_000
	maxWorkspaceHistory   = 1000
	// maxWorkspacesPerOwner bounds what one API key may keep: with the
	// quota and the history's bound (four times it), what one key's
	// workspaces may hold on disk.
	maxWorkspacesPerOwner = 100
)

// MaxWorkspaceImportBytes bounds the contents of one workspace import.
const MaxWorkspaceImportBytes = workspace.MaxImportBytes

// MaxWorkspaceFileBytes bounds one file of a workspace.
const MaxWorkspaceFileBytes = vfs.MaxFileSize

func (c *Controller) workspaces() (*workspace.Store, error) {
	if c.opts.Workspaces == nil {
		return nil, fmt.Errorf("this daemon keeps no workspaces: %w", errdefs.ErrUnavailable)
	}
	return c.opts.Workspaces, nil
}

// CreateWorkspace makes an empty workspace owned by ctx's caller.
func (c *Controller) CreateWorkspace(ctx context.Context, req api.CreateWorkspaceRequest) (*api.Workspace, error) {
	st, rec, err := c.newWorkspace(ctx, req)
	if err != nil {
		return nil, err
	}
	r, err := st.Create(ctx, rec)
	if err != nil {
		return nil, err
	}
	a := r.API()
	return &a, nil
}

// ImportWorkspace makes a workspace owned by ctx's caller from an export
// (workspace.Store.Import), with its whole history.
func (c *Controller) ImportWorkspace(ctx context.Context, req api.CreateWorkspaceRequest, r io.Reader) (*api.Workspace, error) {
	st, rec, err := c.newWorkspace(ctx, req)
	if err != nil {
		return nil, err
	}
	got, err := st.Import(ctx, rec, r)
	if err != nil {
		return nil, err
	}
	a := got.API()
	return &a, nil
}

// ExportWorkspace writes a workspace with its whole history as one file.
func (c *Controller) ExportWorkspace(ctx context.Context, ref string, w io.Writer) error {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return err
	}
	return st.Export(ctx, r, w)
}

// newWorkspace validates a create (or import) request into a record.
func (c *Controller) newWorkspace(ctx context.Context, req api.CreateWorkspaceRequest) (*workspace.Store, workspace.Record, error) {
	st, err := c.workspaces()
	if err != nil {
		return nil, workspace.Record{}, err
	}
	if err := requireCaller(ctx); err != nil {
		return nil, workspace.Record{}, err
	}
	if !nameRE.MatchString(req.Name) {
		return nil, workspace.Record{}, errdefs.Invalid("workspace name %q: use 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", truncate(req.Name, 64))
	}
	quota := func(what string, asked, def, max int64) (int64, error) {
		switch {
		case asked == 0:
			return def, nil
		case asked < 0 || asked > max:
			return 0, errdefs.Invalid("%s %d: give 1 to %d (0 for the default, %d)", what, asked, max, def)
		}
		return asked, nil
	}
	maxBytes, err := quota("max_bytes", req.MaxBytes, defaultWorkspaceBytes, maxWorkspaceBytes)
	if err != nil {
		return nil, workspace.Record{}, err
	}
	maxFiles, err := quota("max_files", req.MaxFiles, defaultWorkspaceFiles, maxWorkspaceFiles)
	if err != nil {
		return nil, workspace.Record{}, err
	}
	all, err := st.List(ctx)
	if err != nil {
		return nil, workspace.Record{}, err
	}
	held := 0
	for _, r := range all {
		if r.Owner == Caller(ctx) {
			held++
		}
	}
	if held >= maxWorkspacesPerOwner {
		return nil, workspace.Record{}, fmt.Errorf("you have %d workspaces, the most one API key may keep: remove one first: %w", held, errdefs.ErrResourceExhausted)
	}
	return st, workspace.Record{ID: newID(), Name: req.Name, Owner: Caller(ctx), MaxBytes: maxBytes, MaxFiles: maxFiles}, nil
}

// ListWorkspaces lists the workspaces ctx's caller may see.
func (c *Controller) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	st, err := c.workspaces()
	if err != nil {
		return nil, err
	}
	if err := requireCaller(ctx); err != nil {
		return nil, err
	}
	all, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Workspace{}
	for _, r := range all {
		if visible(ctx, r.Owner) {
			out = append(out, r.API())
		}
	}
	return out, nil
}

// workspace finds a workspace by id or name that ctx's caller may see;
// one it may not is not found.
func (c *Controller) workspace(ctx context.Context, ref string) (*workspace.Store, workspace.Record, error) {
	st, err := c.workspaces()
	if err != nil {
		return nil, workspace.Record{}, err
	}
	if err := requireCaller(ctx); err != nil {
		return nil, workspace.Record{}, err
	}
	if !validRef(ref) {
		return nil, workspace.Record{}, errdefs.Invalid("%q is not a valid workspace id or name", truncate(ref, 64))
	}
	if idRE.MatchString(ref) {
		r, err := st.Get(ctx, ref)
		if err == nil && visible(ctx, r.Owner) {
			return st, r, nil
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return nil, workspace.Record{}, err
		}
	}
	held, err := st.Named(ctx, ref)
	if err != nil {
		return nil, workspace.Record{}, err
	}
	r, err := pickNamed(ctx, "workspace", ref, held, func(r workspace.Record) string { return r.Owner })
	return st, r, err
}

// GetWorkspace describes a workspace.
func (c *Controller) GetWorkspace(ctx context.Context, ref string) (*api.Workspace, error) {
	_, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	a := r.API()
	return &a, nil
}

// DeleteWorkspace removes a workspace and its history.
func (c *Controller) DeleteWorkspace(ctx context.Context, ref string) error {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return err
	}
	if err := st.Delete(ctx, r.ID); err != nil {
		return err
	}
	c.detachWorkspace(context.WithoutCancel(ctx), r)
	return nil
}

// RunInWorkspace runs one command in a workspace (workspace.Store.Run).
func (c *Controller) RunInWorkspace(ctx context.Context, ref string, req api.WorkspaceRunRequest) (*api.WorkspaceRunResult, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	script, err := workspace.Script(req)
	if err != nil {
		return nil, err
	}
	for k := range req.Env {
		if !envRE.MatchString(k) {
			return nil, errdefs.Invalid("environment variable name %q is not valid", truncate(k, 64))
		}
	}
	if req.Cwd != "" && !fs.ValidPath(req.Cwd) {
		return nil, errdefs.Invalid("cwd %q: give a directory of the workspace relative to its root, like src/app", truncate(req.Cwd, 256))
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if req.TimeoutMs < 0 || timeout > workspace.MaxTimeout {
		return nil, errdefs.Invalid("timeout_ms %d: give 1 to %d (0 for %s)", req.TimeoutMs, workspace.MaxTimeout.Milliseconds(), workspace.DefaultTimeout)
	}
	return st.Run(ctx, workspace.RunSpec{
		Workspace: r, Caller: Caller(ctx), Executor: req.Executor, Script: script, Command: script,
		Stdin: []byte(req.Stdin), Env: req.Env, Cwd: req.Cwd, Timeout: timeout, Argv: req.Command, Container: c.runInContainer,
	})
}

// WorkspaceHistory lists a workspace's versions, newest first.
func (c *Controller) WorkspaceHistory(ctx context.Context, ref string, limit int) ([]api.WorkspaceVersion, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > maxWorkspaceHistory {
		limit = maxWorkspaceHistory
	}
	out, err := st.Versions(ctx, r.ID, limit)
	if out == nil {
		out = []api.WorkspaceVersion{}
	}
	return out, err
}

// WorkspaceDiff lists the paths that differ between two versions; to < 0
// means the current version, from < 0 the one before to.
func (c *Controller) WorkspaceDiff(ctx context.Context, ref string, from, to int64) (*api.WorkspaceDiff, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	if to < 0 {
		to = r.Head
	}
	if from < 0 {
		from = max(to-1, r.Oldest)
	}
	changes, err := st.Diff(ctx, r, from, to)
	if err != nil {
		return nil, err
	}
	if changes == nil {
		changes = []api.WorkspaceChange{}
	}
	return &api.WorkspaceDiff{From: from, To: to, Changes: changes}, nil
}

// RollbackWorkspace makes a new version with the files of an earlier one.
func (c *Controller) RollbackWorkspace(ctx context.Context, ref string, version int64) (*api.WorkspaceRunResult, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	v, changes, err := st.Rollback(ctx, r, version, Caller(ctx))
	if err != nil {
		return nil, err
	}
	return &api.WorkspaceRunResult{BaseVersion: r.Head, Version: v, Changes: changes}, nil
}

// ReadWorkspaceFile reads one file of a workspace's version (the current
// one when version < 0).
func (c *Controller) ReadWorkspaceFile(ctx context.Context, ref, path string, version int64) (workspace.File, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return workspace.File{}, err
	}
	return st.ReadFile(ctx, r, version, path)
}

// WriteWorkspaceFile writes one file of a workspace as a new version
// (workspace.Store.WriteFile); base < 0: on the current version.
func (c *Controller) WriteWorkspaceFile(ctx context.Context, ref, path string, mode fs.FileMode, base int64, body io.Reader) (*api.WorkspaceRunResult, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	return st.WriteFile(ctx, workspace.FileWrite{Workspace: r, Caller: Caller(ctx), Path: path, Data: body, Mode: mode, Base: base})
}

// WorkspaceLedger lists a workspace's ledger (every command run in it)
// after seq after, oldest first.
func (c *Controller) WorkspaceLedger(ctx context.Context, ref string, after int64, limit int) (*api.WorkspaceLedger, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	entries, next, err := st.Ledger(ctx, r.ID, after, limit)
	if err != nil {
		return nil, err
	}
	return &api.WorkspaceLedger{Entries: entries, Next: next}, nil
}

// PruneWorkspace drops a workspace's versions before a version, by hand
// (workspace.Store.Prune).
func (c *Controller) PruneWorkspace(ctx context.Context, ref string, before int64) (*api.WorkspacePruneResult, error) {
	st, r, err := c.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	res, err := st.Prune(ctx, r, before, Caller(ctx))
	if err != nil {
		return nil, err
	}
	return &res, nil
}
