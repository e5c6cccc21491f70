package workspaces

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/workspace"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
)

// The container executor of workspaces: a sandbox per workspace, made on
// the workspace's first container command (attach) and labelled with the
// workspace's id, holding a copy of a version at /workspace. Before a
// command the copy is brought to the version the command sees, by
// removing and writing only the paths that differ from what it is known
// to hold (workspace.SyncPlan; the whole tree when not known: after a
// restart of the daemon, or a command that was stopped); after it, the
// copy is read back and compared with that version
// (workspace.ChangesFromTar), with the content of only the files changed
// since the last read-back (their change time, which no program can set,
// says which).
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

// unchangedMargin is how long before the last read-back's start a file's
// change time must be for the next read-back to skip its content: change
// times come from the kernel's coarser clock (a tick behind the agent's).
const unchangedMargin = 250 * time.Millisecond

// wsContainer is one workspace's attached sandbox.
type wsContainer struct {
	// mu runs one container command of the workspace at a time: they
	// share the sandbox's copy.
	mu      sync.Mutex
	sandbox string
	// held is what the copy holds, nil when not known (it is then copied
	// in whole); walk is the agent's clock when the last read-back began
	// (0: none, the next is read whole); junk is what that read-back
	// skipped (symlinks and the like), removed before the next command.
	held workspace.Copy
	walk int64
	junk []string
}

// forget makes the copy not known: the next command copies it in whole.
func (w *wsContainer) forget() { w.held, w.walk, w.junk = nil, 0, nil }

// containerFor is the workspace's container executor, made on first use.
func (s *Service) containerFor(id string) *wsContainer {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.containers[id]
	if !ok {
		w = &wsContainer{}
		s.containers[id] = w
	}
	return w
}

// asOwner is ctx acting as a workspace's owner, for its sandbox.
func asOwner(ctx context.Context, owner string) context.Context {
	if owner == api.CallerLocal || owner == "" {
		return controller.System(ctx)
	}
	return controller.WithCaller(ctx, owner, api.KeyScopeOwn)
}

// runInContainer is the workspace.ContainerFunc of this controller.
func (s *Service) runInContainer(ctx context.Context, run workspace.ContainerRun) (*workspace.ContainerResult, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	w := s.containerFor(run.Workspace.ID)
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
	if err := s.attach(octx, w, run.Workspace); err != nil {
		return nil, err
	}
	if err := s.syncCopy(octx, st, w, run.Entries); err != nil {
		w.forget()
		return nil, err
	}
	res, err := s.execInCopy(octx, w.sandbox, run)
	if err != nil {
		w.forget()
		return nil, err
	}
	if res.Stopped != "" {
		w.forget() // stopped mid-write, maybe
	} else {
		changes, skipped, err := s.readBack(octx, w, run)
		if err != nil {
			w.forget()
			return nil, err
		}
		res.Changes = changes
		for _, p := range skipped {
			res.Stderr = fmt.Appendf(res.Stderr, "paddock: %s was not kept: a workspace holds regular files and directories only\n", p)
		}
	}
	// The lock is held until the changes landed (or did not), so that the
	// workspace's next container command sees them.
	unlocked = true
	res.Landed = func(int64) { w.mu.Unlock() }
	return res, nil
}

// readBack reads the copy back after a command and compares it with the
// version the command saw, which the copy held when it began: only the
// files changed since the last read-back come with their content (see
// package tree); when the copy turns out not to be the one known, it is
// read again whole.
func (s *Service) readBack(ctx context.Context, w *wsContainer, run workspace.ContainerRun) ([]vfs.Change, []string, error) {
	lim := vfs.Limits{MaxBytes: run.Workspace.MaxBytes, MaxEntries: run.Workspace.MaxFiles}
	read := func(before int64) (changes []vfs.Change, skipped []string, seen workspace.Copy, walk int64, err error) {
		err = s.streamCopy(ctx, w.sandbox, func(ag *client.Client, pw io.Writer) (err error) {
			walk, err = ag.TreeOut(ctx, workspaceDir, "user", before, pw)
			return err
		}, func(r io.Reader) (err error) {
			changes, skipped, seen, err = workspace.ChangesFromTree(r, run.Entries, w.held, lim)
			return err
		})
		return changes, skipped, seen, walk, err
	}
	before := int64(0)
	if w.walk > 0 {
		before = w.walk - int64(unchangedMargin)
	}
	changes, skipped, seen, walk, err := read(before)
	if errors.Is(err, workspace.ErrStaleCopy) {
		s.log.Debug("workspace copy not as known; reading it whole", "workspace", run.Workspace.ID, "sandbox", w.sandbox)
		changes, skipped, seen, walk, err = read(0)
	}
	if errors.Is(err, client.ErrNoTree) { // an agent from before the tree route
		walk = 0
		err = s.streamCopy(ctx, w.sandbox, func(ag *client.Client, pw io.Writer) error {
			return ag.TarOut(ctx, workspaceDir, "user", pw)
		}, func(r io.Reader) (err error) {
			changes, skipped, seen, err = workspace.ChangesFromTar(r, run.Entries, lim)
			return err
		})
	}
	if err != nil {
		return nil, nil, err
	}
	w.held, w.walk, w.junk = seen, walk, skipped
	return changes, skipped, nil
}

// streamCopy pipes what out writes, from the sandbox's agent, into in,
// and returns in's verdict: out's error when in failed on it, none when in
// read all it needed (out may then fail on the rest, read no further).
func (s *Service) streamCopy(ctx context.Context, sandbox string, out func(*client.Client, io.Writer) error, in func(io.Reader) error) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		ag, _, release, err := s.core.Agent(ctx, sandbox)
		if err == nil {
			err = out(ag, pw)
			release()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	err := in(pr)
	if err == nil {
		// What follows the end (a tar's padding) lets the agent finish.
		_, _ = io.Copy(io.Discard, io.LimitReader(pr, 1<<20))
	}
	pr.CloseWithError(errors.New("read no further"))
	werr := <-done
	if err != nil && werr != nil && errors.Is(err, werr) {
		return werr // in saw out fail
	}
	return err
}

// attach finds or makes the workspace's sandbox.
func (s *Service) attach(ctx context.Context, w *wsContainer, ws workspace.Record) error {
	if w.sandbox != "" {
		if _, err := s.core.Get(ctx, w.sandbox); err == nil {
			return nil
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		w.sandbox = ""
		w.forget()
	}
	// One made before a restart of the daemon is used again (its copy's
	// version is unknown, so it is brought up to date whole).
	list, err := s.core.List(ctx, map[string]string{LabelWorkspace: ws.ID})
	if err != nil {
		return err
	}
	for _, sb := range list {
		if sb.State != api.StateDestroyed && sb.State != api.StateError {
			w.sandbox = sb.ID
			w.forget()
			return nil
		}
	}
	sb, err := s.core.Create(ctx, api.CreateSandboxRequest{
		Labels:     map[string]string{LabelWorkspace: ws.ID},
		SleepAfter: workspaceSandboxIdle,
	})
	if err != nil {
		return fmt.Errorf("attach a container to workspace %s: %w", ws.Name, err)
	}
	w.sandbox = sb.ID
	w.forget()
	return nil
}

// syncCopy makes the sandbox's /workspace exactly the version's files:
// from a copy as known, by removing and writing only what differs; else
// (or when that fails) whole.
func (s *Service) syncCopy(ctx context.Context, st *workspace.Store, w *wsContainer, entries []vfs.Entry) error {
	if w.held != nil {
		remove, write, next := workspace.SyncPlan(w.held, entries)
		err := s.syncChanges(ctx, st, w.sandbox, append(remove, w.junk...), write)
		if err == nil {
			w.held, w.junk = next, nil
			return nil
		}
		s.log.Debug("workspace copy: changes not applied; copying it whole", "sandbox", w.sandbox, "err", err)
	}
	w.forget()
	prep := fmt.Sprintf("rm -rf %[1]s && mkdir %[1]s && chown 1000:1000 %[1]s", workspaceDir)
	res, err := s.execCollect(ctx, w.sandbox, api.ExecRequest{Cmd: []string{"/bin/sh", "-c", prep}, User: "root"}, 1<<16)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return fmt.Errorf("prepare the workspace's copy: %w", err)
	}
	if err := s.copyIn(ctx, st, w.sandbox, entries); err != nil {
		return err
	}
	w.held = workspace.CopyOf(entries)
	return nil
}

// maxRemoveArgs bounds the paths one sync removes with one rm; more are
// copied whole instead.
const maxRemoveArgs = 64 << 10

// syncChanges removes paths from the copy and writes entries into it, as
// the sandbox's user (who owns the copy: a link the command planted is
// never followed with more rights than the command had).
func (s *Service) syncChanges(ctx context.Context, st *workspace.Store, sandbox string, remove []string, write []vfs.Entry) error {
	if len(remove) > 0 {
		cmd, n := []string{"rm", "-rf", "--"}, 0
		for _, p := range remove {
			n += len(p) + len(workspaceDir) + 2
			cmd = append(cmd, path.Join(workspaceDir, p))
		}
		if n > maxRemoveArgs {
			return fmt.Errorf("%d paths to remove", len(remove))
		}
		res, err := s.execCollect(ctx, sandbox, api.ExecRequest{Cmd: cmd, User: "user", Cwd: workspaceDir}, 1<<16)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("rm exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			return err
		}
	}
	return s.copyIn(ctx, st, sandbox, write)
}

// copyIn writes entries into the copy as a tar.
func (s *Service) copyIn(ctx context.Context, st *workspace.Store, sandbox string, entries []vfs.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(st.WriteTar(pw, entries)) }()
	err := s.core.TarIn(ctx, controller.FileRef{Sandbox: sandbox, Path: workspaceDir, User: "user"}, pr)
	pr.CloseWithError(errors.New("read no further"))
	if err != nil {
		return fmt.Errorf("copy the workspace into its container: %w", err)
	}
	return nil
}

// execInCopy runs the command in the copy, output bounded.
func (s *Service) execInCopy(ctx context.Context, sandbox string, run workspace.ContainerRun) (*workspace.ContainerResult, error) {
	req := api.ExecRequest{
		Cmd: []string{"/bin/sh", "-c", run.Script}, Env: run.Env, Cwd: path.Join(workspaceDir, run.Cwd),
		Stdin: run.Stdin, Timeout: run.Timeout.String(),
	}
	return s.execCollect(ctx, sandbox, req, workspace.MaxOutput)
}

// execCollect runs an exec and keeps its output up to max bytes in all.
func (s *Service) execCollect(ctx context.Context, sandbox string, req api.ExecRequest, max int) (*workspace.ContainerResult, error) {
	var stdout, stderr bytes.Buffer
	res := &workspace.ContainerResult{}
	var end *api.ExecEvent
	err := s.core.Exec(ctx, sandbox, req, func(ev api.ExecEvent) error {
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

// detach removes a workspace's sandboxes (with the workspace).
func (s *Service) detach(ctx context.Context, ws workspace.Record) {
	s.mu.Lock()
	delete(s.containers, ws.ID)
	s.mu.Unlock()
	octx := asOwner(ctx, ws.Owner)
	list, err := s.core.List(octx, map[string]string{LabelWorkspace: ws.ID})
	if err != nil {
		s.log.Warn("list a removed workspace's sandboxes", "workspace", ws.ID, "err", err)
		return
	}
	for _, sb := range list {
		if err := s.core.Delete(octx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("remove a removed workspace's sandbox", "workspace", ws.ID, "sandbox", sb.ID, "err", err)
		}
	}
}
