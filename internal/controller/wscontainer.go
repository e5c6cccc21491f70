package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// The container executor of workspaces: a sandbox per workspace, made on
// the workspace's first container command (attach) and labelled with the
// workspace's id, holding a copy of a version at /workspace. Before a
// command the copy is brought to the version the command sees (the
// whole tree again when it holds another; most commands follow the
// executor's own last one, whose copy is current); after it, the copy is
// read back and compared with that version (workspace.ChangesFromTar).
// The sandbox stops when idle (its files stay, and the next command
// starts it again) and is removed with the workspace. It is the
// workspace owner's sandbox: it counts against that owner's quota, and it
// has no network.

// LabelWorkspace marks a workspace's container-executor sandbox.
const LabelWorkspace = "paddock.workspace"

const (
	// workspaceDir is where the copy is, in the sandbox and in the shell
	// executor alike.
	workspaceDir = "/workspace"
	// workspaceSandboxIdle stops an idle executor sandbox.
	workspaceSandboxIdle = "2m"
)

// wsContainer is one workspace's attached sandbox.
type wsContainer struct {
	// mu runs one container command of the workspace at a time: they
	// share the sandbox's copy.
	mu      sync.Mutex
	sandbox string
	// version is the version the copy holds; -1 unknown.
	version int64
}

func (c *Controller) wsContainerFor(id string) *wsContainer {
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	if c.wsContainers == nil {
		c.wsContainers = map[string]*wsContainer{}
	}
	w, ok := c.wsContainers[id]
	if !ok {
		w = &wsContainer{version: -1}
		c.wsContainers[id] = w
	}
	return w
}

// asOwner is ctx acting as a workspace's owner, for its sandbox.
func asOwner(ctx context.Context, owner string) context.Context {
	if owner == api.CallerLocal || owner == "" {
		return System(ctx)
	}
	return WithCaller(ctx, owner, api.KeyScopeOwn)
}

// runInContainer is the workspace.ContainerFunc of this controller.
func (c *Controller) runInContainer(ctx context.Context, run workspace.ContainerRun) (*workspace.ContainerResult, error) {
	st, err := c.workspaces()
	if err != nil {
		return nil, err
	}
	w := c.wsContainerFor(run.Workspace.ID)
	w.mu.Lock()
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			w.mu.Unlock()
		}
	}
	defer unlock()
	octx := asOwner(ctx, run.Workspace.Owner)
	if err := c.attach(octx, w, run.Workspace); err != nil {
		return nil, err
	}
	if w.version != run.Version {
		if err := c.syncCopy(octx, st, w, run.Entries); err != nil {
			w.version = -1
			return nil, err
		}
		w.version = run.Version
	}
	// Until the changes land the copy is ahead of every version.
	w.version = -1
	res, err := c.execInCopy(octx, w.sandbox, run)
	if err != nil {
		return nil, err
	}
	if res.Stopped == "" {
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(c.TarOut(octx, FileRef{Sandbox: w.sandbox, Path: workspaceDir, User: "user"}, pw))
		}()
		changes, skipped, err := workspace.ChangesFromTar(pr, run.Entries, vfs.Limits{MaxBytes: run.Workspace.MaxBytes, MaxEntries: run.Workspace.MaxFiles})
		pr.CloseWithError(errors.New("read no further"))
		if err != nil {
			return nil, err
		}
		res.Changes = changes
		for _, p := range skipped {
			res.Stderr = fmt.Appendf(res.Stderr, "paddock: %s was not kept: a workspace holds regular files and directories only\n", p)
		}
	}
	// The lock is held until the store says what the copy now holds.
	unlocked = true
	res.Landed = func(version int64) {
		w.version = version
		w.mu.Unlock()
	}
	return res, nil
}

// attach finds or makes the workspace's sandbox.
func (c *Controller) attach(ctx context.Context, w *wsContainer, ws workspace.Record) error {
	if w.sandbox != "" {
		if _, err := c.Get(ctx, w.sandbox); err == nil {
			return nil
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		w.sandbox, w.version = "", -1
	}
	// One made before a restart of the daemon is used again (its copy's
	// version is unknown, so it is brought up to date whole).
	list, err := c.List(ctx, map[string]string{LabelWorkspace: ws.ID})
	if err != nil {
		return err
	}
	for _, sb := range list {
		if sb.State != api.StateDestroyed && sb.State != api.StateError {
			w.sandbox, w.version = sb.ID, -1
			return nil
		}
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{
		Labels:     map[string]string{LabelWorkspace: ws.ID},
		SleepAfter: workspaceSandboxIdle,
	})
	if err != nil {
		return fmt.Errorf("attach a container to workspace %s: %w", ws.Name, err)
	}
	w.sandbox, w.version = sb.ID, -1
	return nil
}

// syncCopy makes the sandbox's /workspace exactly the version's files.
func (c *Controller) syncCopy(ctx context.Context, st *workspace.Store, w *wsContainer, entries []vfs.Entry) error {
	prep := fmt.Sprintf("rm -rf %[1]s && mkdir %[1]s && chown 1000:1000 %[1]s", workspaceDir)
	res, err := c.execCollect(ctx, w.sandbox, api.ExecRequest{Cmd: []string{"/bin/sh", "-c", prep}, User: "root"}, 1<<16)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return fmt.Errorf("prepare the workspace's copy: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(st.WriteTar(pw, entries)) }()
	err = c.TarIn(ctx, FileRef{Sandbox: w.sandbox, Path: workspaceDir, User: "user"}, pr)
	pr.CloseWithError(errors.New("read no further"))
	if err != nil {
		return fmt.Errorf("copy the workspace into its container: %w", err)
	}
	return nil
}

// execInCopy runs the command in the copy, output bounded.
func (c *Controller) execInCopy(ctx context.Context, sandbox string, run workspace.ContainerRun) (*workspace.ContainerResult, error) {
	req := api.ExecRequest{
		Cmd: []string{"/bin/sh", "-c", run.Script}, Env: run.Env, Cwd: path.Join(workspaceDir, run.Cwd),
		Stdin: run.Stdin, Timeout: run.Timeout.String(),
	}
	return c.execCollect(ctx, sandbox, req, workspace.MaxOutput)
}

// execCollect runs an exec and keeps its output up to max bytes in all.
func (c *Controller) execCollect(ctx context.Context, sandbox string, req api.ExecRequest, max int) (*workspace.ContainerResult, error) {
	var stdout, stderr bytes.Buffer
	res := &workspace.ContainerResult{}
	var end *api.ExecEvent
	err := c.Exec(ctx, sandbox, req, func(ev api.ExecEvent) error {
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			buf := &stdout
			if ev.Type == api.EventStderr {
				buf = &stderr
			}
			if stdout.Len()+stderr.Len()+len(ev.Data) > max {
				res.Stopped = "output limit"
				return errors.New("output limit")
			}
			buf.Write(ev.Data)
		case api.EventEnd:
			e := ev
			end = &e
		}
		return nil
	})
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	switch {
	case res.Stopped != "":
		res.ExitCode = 125
		return res, nil
	case err != nil:
		return nil, err
	case end == nil:
		return nil, fmt.Errorf("the container's command ended without a status: %w", errdefs.ErrUnavailable)
	case end.Error != nil:
		return nil, fmt.Errorf("the container's command: %s: %w", end.Error.Message, errdefs.ErrUnavailable)
	case end.TimedOut:
		res.Stopped, res.ExitCode = "timeout", 124
	case end.ExitCode != nil:
		res.ExitCode = *end.ExitCode
	}
	return res, nil
}

// detachWorkspace removes a workspace's sandboxes (with the workspace).
func (c *Controller) detachWorkspace(ctx context.Context, ws workspace.Record) {
	c.wsMu.Lock()
	delete(c.wsContainers, ws.ID)
	c.wsMu.Unlock()
	octx := asOwner(ctx, ws.Owner)
	list, err := c.List(octx, map[string]string{LabelWorkspace: ws.ID})
	if err != nil {
		c.log.Warn("list a removed workspace's sandboxes", "workspace", ws.ID, "err", err)
		return
	}
	for _, sb := range list {
		if err := c.Delete(octx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			c.log.Warn("remove a removed workspace's sandbox", "workspace", ws.ID, "sandbox", sb.ID, "err", err)
		}
	}
}
