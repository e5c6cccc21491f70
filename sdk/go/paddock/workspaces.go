package paddock

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddock-dev/paddock/api"
)

// workspacePath returns /v1/workspaces/{ref}{suffix} with ref escaped.
func workspacePath(ref, suffix string) (string, error) {
	e, err := escapeRef("workspace id or name", ref)
	if err != nil {
		return "", err
	}
	return "/v1/workspaces/" + e + suffix, nil
}

// CreateWorkspace makes an empty workspace: a named filesystem the daemon
// keeps, with every change recorded as a version.
func (c *Client) CreateWorkspace(ctx context.Context, req api.CreateWorkspaceRequest) (*api.Workspace, error) {
	var out api.Workspace
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/workspaces", jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWorkspaces lists the workspaces the caller may see.
func (c *Client) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	var out api.WorkspaceList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/workspaces"}, &out); err != nil {
		return nil, err
	}
	return out.Workspaces, nil
}

// GetWorkspace describes a workspace, by id or name.
func (c *Client) GetWorkspace(ctx context.Context, ref string) (*api.Workspace, error) {
	p, err := workspacePath(ref, "")
	if err != nil {
		return nil, err
	}
	var out api.Workspace
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWorkspace removes a workspace and its history.
func (c *Client) DeleteWorkspace(ctx context.Context, ref string) error {
	p, err := workspacePath(ref, "")
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// RunInWorkspace runs one command in a workspace. Its changes land as one
// new version when it ends by itself; ErrConflict when a concurrent
// command changed the same paths first (nothing of it landed: run it
// again).
func (c *Client) RunInWorkspace(ctx context.Context, ref string, req api.WorkspaceRunRequest) (*api.WorkspaceRunResult, error) {
	p, err := workspacePath(ref, "/run")
	if err != nil {
		return nil, err
	}
	var out api.WorkspaceRunResult
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkspaceHistory lists a workspace's versions, newest first (limit 0:
// the daemon's most, 1000).
func (c *Client) WorkspaceHistory(ctx context.Context, ref string, limit int) ([]api.WorkspaceVersion, error) {
	p, err := workspacePath(ref, "/versions")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out api.WorkspaceHistory
	if err := c.call(ctx, request{method: http.MethodGet, path: p, query: q}, &out); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// WorkspaceDiff lists the paths that differ between versions from and to;
// a negative to is the current version, a negative from the one before to.
func (c *Client) WorkspaceDiff(ctx context.Context, ref string, from, to int64) (*api.WorkspaceDiff, error) {
	p, err := workspacePath(ref, "/diff")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if from >= 0 {
		q.Set("from", strconv.FormatInt(from, 10))
	}
	if to >= 0 {
		q.Set("to", strconv.FormatInt(to, 10))
	}
	var out api.WorkspaceDiff
	if err := c.call(ctx, request{method: http.MethodGet, path: p, query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RollbackWorkspace makes a new version whose files are those of an
// earlier version (the history is kept).
func (c *Client) RollbackWorkspace(ctx context.Context, ref string, version int64) (*api.WorkspaceRunResult, error) {
	p, err := workspacePath(ref, "/rollback")
	if err != nil {
		return nil, err
	}
	var out api.WorkspaceRunResult
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: api.WorkspaceRollbackRequest{Version: version}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExportWorkspace writes a workspace with its whole history to w as one
// tar file, for ImportWorkspace here or on another daemon.
func (c *Client) ExportWorkspace(ctx context.Context, ref string, w io.Writer) error {
	p, err := workspacePath(ref, "/export")
	if err != nil {
		return err
	}
	return c.download(ctx, request{method: http.MethodGet, path: p, accept: "application/x-tar"}, w)
}

// ImportWorkspace makes a new workspace, named and sized by req, from an
// exported file, with its history. A tampered or inconsistent file is
// refused whole (ErrInvalidArgument).
func (c *Client) ImportWorkspace(ctx context.Context, req api.CreateWorkspaceRequest, r io.Reader) (*api.Workspace, error) {
	if r == nil {
		return nil, fmt.Errorf("nil reader: %w", ErrInvalidArgument)
	}
	q := url.Values{"name": {req.Name}}
	if req.MaxBytes > 0 {
		q.Set("max_bytes", strconv.FormatInt(req.MaxBytes, 10))
	}
	if req.MaxFiles > 0 {
		q.Set("max_files", strconv.FormatInt(req.MaxFiles, 10))
	}
	var out api.Workspace
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/workspaces/import", query: q, body: r, ctype: "application/x-tar"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkspaceFile describes a file ReadWorkspaceFile read.
type WorkspaceFile struct {
	// Version is the workspace version the file was read from: give it
	// as WriteWorkspaceFileOptions.Base to write the file back only if
	// nothing changed it since.
	Version int64
	Mode    fs.FileMode
}

// ReadWorkspaceFile writes the content of the file at path (relative to
// the workspace's root, like src/app.py) to w: of version, or of the
// current version when version < 0.
func (c *Client) ReadWorkspaceFile(ctx context.Context, ref, path string, version int64, w io.Writer) (*WorkspaceFile, error) {
	p, err := workspacePath(ref, "/files")
	if err != nil {
		return nil, err
	}
	q := url.Values{"path": {path}}
	if version >= 0 {
		q.Set("version", strconv.FormatInt(version, 10))
	}
	h, err := c.downloadHeader(ctx, request{method: http.MethodGet, path: p, query: q, accept: "application/octet-stream"}, w)
	if err != nil {
		return nil, err
	}
	out := &WorkspaceFile{Version: -1}
	if v, err := strconv.ParseInt(h.Get(api.WorkspaceVersionHeader), 10, 64); err == nil {
		out.Version = v
	}
	if m, err := strconv.ParseUint(h.Get(api.FileModeHeader), 8, 32); err == nil {
		out.Mode = fs.FileMode(m).Perm()
	}
	return out, nil
}

// WriteWorkspaceFileOptions tune WriteWorkspaceFile.
type WriteWorkspaceFileOptions struct {
	// Mode sets the file's permission bits; 0 keeps an existing file's
	// and gives a new one 0644.
	Mode fs.FileMode
	// Base, when above 0, is the version the caller read: if a later
	// version changed the file, nothing is written and the error is
	// ErrConflict. 0 writes on the current version.
	Base int64
}

// WriteWorkspaceFile writes r's content as the file at path (relative to
// the workspace's root), making missing parent directories, as one new
// version of the workspace.
func (c *Client) WriteWorkspaceFile(ctx context.Context, ref, path string, r io.Reader, opts WriteWorkspaceFileOptions) (*api.WorkspaceRunResult, error) {
	if r == nil {
		return nil, fmt.Errorf("nil reader: %w", ErrInvalidArgument)
	}
	p, err := workspacePath(ref, "/files")
	if err != nil {
		return nil, err
	}
	q := url.Values{"path": {path}}
	if perm := opts.Mode.Perm(); perm != 0 {
		q.Set("mode", fmt.Sprintf("%04o", uint32(perm)))
	}
	if opts.Base > 0 {
		q.Set("base", strconv.FormatInt(opts.Base, 10))
	}
	var out api.WorkspaceRunResult
	if err := c.call(ctx, request{method: http.MethodPut, path: p, query: q, body: r, ctype: "application/octet-stream"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkspaceLedger lists a workspace's ledger, every command run in it and
// every file written through WriteWorkspaceFile, oldest first, after seq
// after (0: from the start), at most limit (0: the daemon's most, 1000).
// When the answer's Next is set there are more: ask again after it.
func (c *Client) WorkspaceLedger(ctx context.Context, ref string, after int64, limit int) (*api.WorkspaceLedger, error) {
	p, err := workspacePath(ref, "/ledger")
	if err != nil {
		return nil, err
	}
	var out api.WorkspaceLedger
	if err := c.call(ctx, request{method: http.MethodGet, path: p, query: pageQuery(after, limit)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PruneWorkspace drops a workspace's versions before version before (the
// current version is always kept): they can no longer be diffed, read or
// rolled back to, and the contents only they held are freed.
func (c *Client) PruneWorkspace(ctx context.Context, ref string, before int64) (*api.WorkspacePruneResult, error) {
	p, err := workspacePath(ref, "/prune")
	if err != nil {
		return nil, err
	}
	var out api.WorkspacePruneResult
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: api.WorkspacePruneRequest{Before: before}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
