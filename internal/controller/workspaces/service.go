// Package workspaces is the controller's workspaces subsystem: named
// filesystems the daemon keeps (internal/workspace) get here what every
// object gets (an owner, names per owner, visibility by scope, quotas),
// and their container executor (container.go), a sandbox per workspace
// that it makes and drives through the controller's core (Core).
package workspaces

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

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

// Core is what the subsystem uses of the controller: the sandboxes of the
// container executor, made, found, driven and removed as the caller the
// context names (*controller.Controller implements it).
type Core interface {
	Create(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error)
	Get(ctx context.Context, ref string) (*api.Sandbox, error)
	List(ctx context.Context, labels map[string]string) ([]api.Sandbox, error)
	Delete(ctx context.Context, ref string) error
	Exec(ctx context.Context, ref string, req api.ExecRequest, emit controller.Emit) error
	TarIn(ctx context.Context, f controller.FileRef, r io.Reader) error
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
}

var _ Core = (*controller.Controller)(nil)

// Service serves workspaces: their tenancy, their commands, files,
// history and ledger, and their container executor.
type Service struct {
	core Core
	st   *workspace.Store
	log  *slog.Logger

	// mu guards containers: each workspace's attached container executor.
	mu         sync.Mutex
	containers map[string]*wsContainer
}

// New returns the subsystem over st (nil: this daemon keeps no
// workspaces, and every call says so) with core for its sandboxes.
func New(core Core, st *workspace.Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: core, st: st, log: log, containers: map[string]*wsContainer{}}
}

func (s *Service) store() (*workspace.Store, error) {
	if s == nil || s.st == nil {
		return nil, fmt.Errorf("this daemon keeps no workspaces: %w", errdefs.ErrUnavailable)
	}
	return s.st, nil
}

// Create makes an empty workspace owned by ctx's caller.
func (s *Service) Create(ctx context.Context, req api.CreateWorkspaceRequest) (*api.Workspace, error) {
	st, rec, err := s.newWorkspace(ctx, req)
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

// Import makes a workspace owned by ctx's caller from an export
// (workspace.Store.Import), with its whole history.
func (s *Service) Import(ctx context.Context, req api.CreateWorkspaceRequest, r io.Reader) (*api.Workspace, error) {
	st, rec, err := s.newWorkspace(ctx, req)
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

// Export writes a workspace with its whole history as one file.
func (s *Service) Export(ctx context.Context, ref string, w io.Writer) error {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return err
	}
	return st.Export(ctx, r, w)
}

// newWorkspace validates a create (or import) request into a record.
func (s *Service) newWorkspace(ctx context.Context, req api.CreateWorkspaceRequest) (*workspace.Store, workspace.Record, error) {
	st, err := s.store()
	if err != nil {
		return nil, workspace.Record{}, err
	}
	if err := controller.RequireCaller(ctx); err != nil {
		return nil, workspace.Record{}, err
	}
	if !rules.ValidName(req.Name) {
		return nil, workspace.Record{}, errdefs.Invalid("workspace name %q: use 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", rules.Truncate(req.Name, 64))
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
		if r.Owner == controller.Caller(ctx) {
			held++
		}
	}
	if held >= maxWorkspacesPerOwner {
		return nil, workspace.Record{}, fmt.Errorf("you have %d workspaces, the most one API key may keep: remove one first: %w", held, errdefs.ErrResourceExhausted)
	}
	return st, workspace.Record{ID: controller.NewID(), Name: req.Name, Owner: controller.Caller(ctx), MaxBytes: maxBytes, MaxFiles: maxFiles}, nil
}

// List lists the workspaces ctx's caller may see.
func (s *Service) List(ctx context.Context) ([]api.Workspace, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	if err := controller.RequireCaller(ctx); err != nil {
		return nil, err
	}
	all, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Workspace{}
	for _, r := range all {
		if controller.Visible(ctx, r.Owner) {
			out = append(out, r.API())
		}
	}
	return out, nil
}

// workspace finds a workspace by id or name that ctx's caller may see;
// one it may not is not found.
func (s *Service) workspace(ctx context.Context, ref string) (*workspace.Store, workspace.Record, error) {
	st, err := s.store()
	if err != nil {
		return nil, workspace.Record{}, err
	}
	if err := controller.RequireCaller(ctx); err != nil {
		return nil, workspace.Record{}, err
	}
	if !controller.ValidRef(ref) {
		return nil, workspace.Record{}, errdefs.Invalid("%q is not a valid workspace id or name", rules.Truncate(ref, 64))
	}
	if controller.IsID(ref) {
		r, err := st.Get(ctx, ref)
		if err == nil && controller.Visible(ctx, r.Owner) {
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
	r, err := controller.PickNamed(ctx, "workspace", ref, held, func(r workspace.Record) string { return r.Owner })
	return st, r, err
}

// Get describes a workspace.
func (s *Service) Get(ctx context.Context, ref string) (*api.Workspace, error) {
	_, r, err := s.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	a := r.API()
	return &a, nil
}

// Delete removes a workspace and its history.
func (s *Service) Delete(ctx context.Context, ref string) error {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return err
	}
	if err := st.Delete(ctx, r.ID); err != nil {
		return err
	}
	s.detach(context.WithoutCancel(ctx), r)
	return nil
}

// Run runs one command in a workspace (workspace.Store.Run).
func (s *Service) Run(ctx context.Context, ref string, req api.WorkspaceRunRequest) (*api.WorkspaceRunResult, error) {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	script, err := workspace.Script(req)
	if err != nil {
		return nil, err
	}
	for k := range req.Env {
		if !rules.ValidEnvName(k) {
			return nil, errdefs.Invalid("environment variable name %q is not valid", rules.Truncate(k, 64))
		}
	}
	if req.Cwd != "" && !fs.ValidPath(req.Cwd) {
		return nil, errdefs.Invalid("cwd %q: give a directory of the workspace relative to its root, like src/app", rules.Truncate(req.Cwd, 256))
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if req.TimeoutMs < 0 || timeout > workspace.MaxTimeout {
		return nil, errdefs.Invalid("timeout_ms %d: give 1 to %d (0 for %s)", req.TimeoutMs, workspace.MaxTimeout.Milliseconds(), workspace.DefaultTimeout)
	}
	return st.Run(ctx, workspace.RunSpec{
		Workspace: r, Caller: controller.Caller(ctx), Executor: req.Executor, Script: script, Command: script,
		Stdin: []byte(req.Stdin), Env: req.Env, Cwd: req.Cwd, Timeout: timeout, Argv: req.Command, Container: s.runInContainer,
	})
}

// History lists a workspace's versions, newest first.
func (s *Service) History(ctx context.Context, ref string, limit int) ([]api.WorkspaceVersion, error) {
	st, r, err := s.workspace(ctx, ref)
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

// Diff lists the paths that differ between two versions; to < 0
// means the current version, from < 0 the one before to.
func (s *Service) Diff(ctx context.Context, ref string, from, to int64) (*api.WorkspaceDiff, error) {
	st, r, err := s.workspace(ctx, ref)
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

// Rollback makes a new version with the files of an earlier one.
func (s *Service) Rollback(ctx context.Context, ref string, version int64) (*api.WorkspaceRunResult, error) {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	v, changes, err := st.Rollback(ctx, r, version, controller.Caller(ctx))
	if err != nil {
		return nil, err
	}
	return &api.WorkspaceRunResult{BaseVersion: r.Head, Version: v, Changes: changes}, nil
}

// ReadFile reads one file of a workspace's version (the current
// one when version < 0).
func (s *Service) ReadFile(ctx context.Context, ref, path string, version int64) (workspace.File, error) {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return workspace.File{}, err
	}
	return st.ReadFile(ctx, r, version, path)
}

// WriteFile writes one file of a workspace as a new version
// (workspace.Store.WriteFile); base < 0: on the current version.
func (s *Service) WriteFile(ctx context.Context, ref, path string, mode fs.FileMode, base int64, body io.Reader) (*api.WorkspaceRunResult, error) {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	return st.WriteFile(ctx, workspace.FileWrite{Workspace: r, Caller: controller.Caller(ctx), Path: path, Data: body, Mode: mode, Base: base})
}

// Ledger lists a workspace's ledger (every command run in it)
// after seq after, oldest first.
func (s *Service) Ledger(ctx context.Context, ref string, after int64, limit int) (*api.WorkspaceLedger, error) {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	entries, next, err := st.Ledger(ctx, r.ID, after, limit)
	if err != nil {
		return nil, err
	}
	return &api.WorkspaceLedger{Entries: entries, Next: next}, nil
}

// Prune drops a workspace's versions before a version, by hand
// (workspace.Store.Prune).
func (s *Service) Prune(ctx context.Context, ref string, before int64) (*api.WorkspacePruneResult, error) {
	st, r, err := s.workspace(ctx, ref)
	if err != nil {
		return nil, err
	}
	res, err := st.Prune(ctx, r, before, controller.Caller(ctx))
	if err != nil {
		return nil, err
	}
	return &res, nil
}
