package workspace

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/shellquote"
	"github.com/paddock-dev/paddock/internal/workspace/vfs"
	"github.com/paddock-dev/paddock/internal/workspace/wjs"
	"github.com/paddock-dev/paddock/internal/workspace/wsh"
)

// Bounds of one command.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 10 * time.Minute
	// MaxOutput bounds a command's stdout and stderr together: they come
	// back in one JSON body.
	MaxOutput = 4 << 20
	// MaxMemory bounds what the shell executor holds for one command
	// (its variables and the input a tool reads at once).
	MaxMemory = 256 << 20
)

// RunSpec is one command for Run.
type RunSpec struct {
	Workspace Record
	Caller    string
	Executor  string
	// Script is the command as shell text; Command how history shows it.
	Script  string
	Command string
	Stdin   []byte
	Env     map[string]string
	Cwd     string
	Timeout time.Duration
	// Argv are the request's command words, when it gave words: the js
	// executor runs Argv[0] as a program file of the workspace with the
	// rest as its arguments (Script is their quoted text then).
	Argv []string
	// Container runs commands for the container executor; nil when this
	// daemon has none.
	Container ContainerFunc
}

// Run runs one command in a workspace and lands what it changed as one
// new version (Apply): whole when it ends by itself, whatever its exit
// code; nothing when an executor's bound stopped it.
func (s *Store) Run(ctx context.Context, spec RunSpec) (*api.WorkspaceRunResult, error) {
	executor, reason, err := choose(spec.Executor, spec.Script, spec.Container != nil, s.JSCommand != nil)
	if err != nil {
		return nil, err
	}
	// The record was read by the caller just now; its version is the one
	// the command sees (a newer one landing meanwhile is a concurrent
	// command's, which Apply tells apart).
	base, index, err := s.headOf(ctx, spec.Workspace)
	if err != nil {
		return nil, err
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if executor == api.ExecutorContainer {
		return s.runInContainer(ctx, spec, reason, base, index.Entries(), timeout)
	}
	tree := vfs.FromIndex(index, s.Content, vfs.Limits{MaxBytes: spec.Workspace.MaxBytes, MaxEntries: spec.Workspace.MaxFiles})
	var stdout, stderr bytes.Buffer
	var res wsh.Result
	if executor == api.ExecutorJS {
		opts := wjs.Options{
			Command: s.JSCommand, Source: spec.Script, Stdin: spec.Stdin, Stdout: &stdout, Stderr: &stderr,
			Env: spec.Env, Dir: spec.Cwd, Timeout: timeout, MaxOutput: MaxOutput, MaxMemory: MaxMemory,
		}
		if len(spec.Argv) > 0 {
			opts.Source, opts.File, opts.Args = "", spec.Argv[0], spec.Argv[1:]
		}
		r := wjs.Run(ctx, tree, opts)
		res = wsh.Result{ExitCode: r.ExitCode, Stopped: r.Stopped, Duration: r.Duration}
	} else {
		res = wsh.Run(ctx, tree, wsh.Options{
			Script: spec.Script, Stdin: bytes.NewReader(spec.Stdin), Stdout: &stdout, Stderr: &stderr,
			Env: spec.Env, Dir: spec.Cwd, Timeout: timeout, MaxOutput: MaxOutput, MaxMemory: MaxMemory,
		})
	}
	out := &api.WorkspaceRunResult{
		Executor: executor, Reason: reason, ExitCode: res.ExitCode, Stopped: res.Stopped,
		Stdout: stdout.String(), Stderr: stderr.String(), BaseVersion: base, Version: base,
		DurationMs: float64(res.Duration.Microseconds()) / 1000,
	}
	changes := changesOf(tree, res.Stopped)
	if len(changes) > 0 {
		if err := ctx.Err(); err != nil {
			out.Stopped = "the request ended before the command's changes were kept"
			_ = s.finish(ctx, s.commit(spec, base, nil, out), out)
			return nil, fmt.Errorf("the request ended before the command's changes were kept; nothing of it was kept: %w", err)
		}
	}
	// The changes land even if the client goes away now: the command ran
	// whole, so its changes are kept whole.
	if err := s.finish(ctx, s.commit(spec, base, changes, out), out); err != nil {
		return nil, err
	}
	return out, nil
}

// commit is the Commit of a command of spec that saw version base.
func (s *Store) commit(spec RunSpec, base int64, changes []vfs.Change, out *api.WorkspaceRunResult) Commit {
	return Commit{
		Workspace: spec.Workspace.ID, Base: base, Changes: changes,
		Caller: spec.Caller, Executor: out.Executor, Command: spec.Command, ExitCode: out.ExitCode,
	}
}

// runInContainer runs the command on the container executor and lands
// what it changed.
func (s *Store) runInContainer(ctx context.Context, spec RunSpec, reason string, base int64, entries []vfs.Entry, timeout time.Duration) (*api.WorkspaceRunResult, error) {
	start := time.Now()
	res, err := spec.Container(ctx, ContainerRun{
		Workspace: spec.Workspace, Version: base, Entries: entries, Script: spec.Script,
		Stdin: spec.Stdin, Env: spec.Env, Cwd: spec.Cwd, Timeout: timeout,
	})
	if err != nil {
		return nil, err
	}
	out := &api.WorkspaceRunResult{
		Executor: api.ExecutorContainer, Reason: reason, ExitCode: res.ExitCode, Stopped: res.Stopped,
		Stdout: string(res.Stdout), Stderr: string(res.Stderr), BaseVersion: base, Version: base,
		DurationMs: float64(time.Since(start).Microseconds()) / 1000,
	}
	landed := int64(-1)
	defer func() { res.Landed(landed) }()
	var changes []vfs.Change
	if res.Stopped == "" {
		changes = res.Changes
	}
	if err := s.finish(ctx, s.commit(spec, base, changes, out), out); err != nil {
		return nil, err
	}
	if res.Stopped == "" {
		landed = out.Version
	}
	return out, nil
}

// choose picks the executor for script: the one asked for, or for auto
// the cheapest that can run it, with the reason.
func choose(asked, script string, container, js bool) (executor, reason string, err error) {
	noContainer := fmt.Errorf("this daemon has no container executor for workspaces: %w", errdefs.ErrFailedPrecondition)
	switch asked {
	case api.ExecutorShell:
		return api.ExecutorShell, "", nil
	case api.ExecutorJS:
		if !js {
			return "", "", fmt.Errorf("this daemon has no JavaScript executor for workspaces: %w", errdefs.ErrFailedPrecondition)
		}
		return api.ExecutorJS, "", nil
	case api.ExecutorContainer:
		if !container {
			return "", "", noContainer
		}
		return api.ExecutorContainer, "", nil
	case "", api.ExecutorAuto:
	default:
		return "", "", errdefs.Invalid("executor %q is not one of %s, %s, %s, %s", truncate(asked, 32), api.ExecutorShell, api.ExecutorJS, api.ExecutorContainer, api.ExecutorAuto)
	}
	missing, err := wsh.Needs(script)
	if err != nil {
		return "", "", errdefs.Invalid("the command does not parse as shell: %v", err)
	}
	if len(missing) == 0 {
		return api.ExecutorShell, "every command it runs is built into the shell executor", nil
	}
	if !container {
		return "", "", fmt.Errorf("the command runs %s, which the shell executor does not have, and %w", strings.Join(missing, ", "), noContainer)
	}
	return api.ExecutorContainer, "it runs " + strings.Join(missing, ", ") + ", which the shell executor does not have", nil
}

// Script turns a request's command into shell text: Script as it is, or
// Command's words quoted so that each stays one word.
func Script(req api.WorkspaceRunRequest) (string, error) {
	switch {
	case req.Script != "" && len(req.Command) > 0:
		return "", errdefs.Invalid("give either command or script, not both")
	case req.Script != "":
		return req.Script, nil
	case len(req.Command) == 0:
		return "", errdefs.Invalid("command or script is required")
	}
	words := make([]string, len(req.Command))
	for i, w := range req.Command {
		words[i] = shellquote.Word(w)
	}
	return strings.Join(words, " "), nil
}
