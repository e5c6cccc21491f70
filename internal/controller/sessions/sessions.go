// Package sessions is the shell sessions subsystem: a shell kept running
// in a sandbox's agent under a name, made, listed and ended here, and the
// commands run in it one after another (Exec, with exec's stream contract:
// one start, output, exactly one end), each recorded in the sandbox's
// ledger as an exec naming its session. It reaches sandboxes through Core.
// It sits beneath the controller's core, which makes it and implements
// Core, because an exec naming a session is one of the core's execs; the
// API server reaches it through the controller.
package sessions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/ledger"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
)

// Core is what the subsystem uses of the controller.
type Core interface {
	// Agent reaches a sandbox ctx's caller may use, starting a stopped
	// one first; done ends the use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
	// Record appends a daemon-made entry to a sandbox's ledger.
	Record(ctx context.Context, sandboxID string, e api.LedgerEntry) error
}

// Service serves shell sessions.
type Service struct {
	core Core
	// execTimeout is a command's timeout when its request names none.
	execTimeout time.Duration
}

// New returns the subsystem; execTimeout is a command's default timeout.
func New(core Core, execTimeout time.Duration) *Service {
	return &Service{core: core, execTimeout: execTimeout}
}

// Create starts a shell session in a sandbox (starting a stopped
// sandbox first). Sessions live in the sandbox's agent: a stop or a
// restart of the sandbox ends them.
func (s *Service) Create(ctx context.Context, ref string, req api.CreateSessionRequest) (*api.Session, error) {
	if req.User != "" && !rules.ValidUser(req.User) {
		return nil, errdefs.Invalid("user %q is not a valid user name", req.User)
	}
	if err := rules.Env(req.Env); err != nil {
		return nil, err
	}
	if strings.ContainsRune(req.Cwd, 0) || len(req.Cwd) > 4096 {
		return nil, errdefs.Invalid("cwd is not a valid path")
	}
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	info, err := ag.CreateSession(ctx, &agentv1.CreateSessionRequest{Name: req.Name, User: req.User, Cwd: req.Cwd, Env: req.Env})
	if err != nil {
		return nil, err
	}
	out := sessionToAPI(info)
	return &out, nil
}

// List lists a sandbox's sessions, oldest first.
func (s *Service) List(ctx context.Context, ref string) ([]api.Session, error) {
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	list, err := ag.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Session, 0, len(list))
	for _, info := range list {
		out = append(out, sessionToAPI(info))
	}
	return out, nil
}

// Delete ends a session's shell and the jobs it started.
func (s *Service) Delete(ctx context.Context, ref, name string) error {
	ag, _, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	return ag.DeleteSession(ctx, name)
}

func sessionToAPI(s *agentv1.SessionInfo) api.Session {
	out := api.Session{
		Name: s.GetName(), User: s.GetUser(), Cwd: s.GetCwd(), Env: s.GetEnv(), Shell: s.GetShell(),
		Pid: s.GetPid(), Busy: s.GetBusy(), Queued: int(s.GetQueued()), Commands: s.GetCommands(),
		Restarts: int(s.GetRestarts()), CreatedAt: time.Unix(0, s.GetCreatedAtUnixNano()).UTC(),
		ShellEnded: s.GetShellEnded(), ShellSignal: s.GetShellSignal(),
	}
	if out.ShellEnded && out.ShellSignal == "" {
		code := int(s.GetShellExitCode())
		out.ShellExitCode = &code
	}
	return out
}

// sessionCommand checks an exec bound for a session and returns its shell
// text: argv words joined by spaces, as ssh does with a remote command.
func sessionCommand(req *api.ExecRequest) (string, error) {
	if len(req.Cmd) == 0 {
		return "", errdefs.Invalid("cmd is empty: give the shell command to run in the session")
	}
	if len(req.Cmd) > rules.MaxCmdArgs {
		return "", errdefs.Invalid("cmd has %d arguments, at most %d", len(req.Cmd), rules.MaxCmdArgs)
	}
	text := strings.Join(req.Cmd, " ")
	switch {
	case req.Session == "":
		return "", errdefs.Invalid("queue_timeout needs a session")
	case strings.TrimSpace(text) == "":
		return "", errdefs.Invalid("cmd is empty: give the shell command to run in the session")
	case len(text) > rules.MaxCmdBytes:
		return "", errdefs.Invalid("cmd is %d bytes, at most %d", len(text), rules.MaxCmdBytes)
	case strings.ContainsRune(text, 0):
		return "", errdefs.Invalid("cmd must not contain NUL bytes")
	case len(req.Env) > 0:
		return "", errdefs.Invalid("env cannot be set per command in a session: export it in the session, or give it when creating the session")
	case req.Cwd != "":
		return "", errdefs.Invalid("cwd cannot be set per command in a session: cd in the session instead")
	case len(req.Stdin) > 0:
		return "", errdefs.Invalid("stdin is not available to session commands (they read /dev/null); use a plain exec")
	case req.User != "" && !rules.ValidUser(req.User):
		return "", errdefs.Invalid("user %q is not a valid user name", req.User)
	}
	return text, nil
}

// Exec runs a command in a session with exec's stream contract: one
// start, output, exactly one end with the real status or an error.
func (s *Service) Exec(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) error {
	text, err := sessionCommand(&req)
	if err != nil {
		return err
	}
	timeout := s.execTimeout
	if req.Timeout != "" {
		if timeout, err = rules.ParseDuration("timeout", req.Timeout, time.Millisecond); err != nil {
			return err
		}
	}
	queue, err := rules.QueueTimeout(req.QueueTimeout)
	if err != nil {
		return err
	}
	ag, sandboxID, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	// Recorded as an exec, with the session it ran in; the session's env
	// was given when it was created and is not the command's.
	l := ledger.NewCommand(api.LedgerExec, req.Cmd)
	l.User, l.Data["session"] = req.User, req.Session
	emit, streamEnd := ledger.WatchExec(emit)
	defer func() { _ = s.core.Record(ctx, sandboxID, l.Entry(ledger.ExecEnd(streamEnd()))) }()

	started := false
	var emitErr error
	send := func(ev api.ExecEvent) error {
		if emitErr == nil {
			emitErr = emit(ev)
		}
		return emitErr
	}
	end, err := ag.ExecInSession(ctx, &agentv1.SessionExecRequest{
		Session: req.Session, Command: text, User: req.User,
		TimeoutMs: timeout.Milliseconds(), QueueTimeoutMs: queue.Milliseconds(),
	}, func(ev *agentv1.SessionExecEvent) error {
		switch {
		case ev.GetStart() != nil:
			started = true
			return send(api.ExecEvent{Type: api.EventStart, Pid: ev.GetStart().GetShellPid()})
		case ev.GetStdout() != nil:
			return send(api.ExecEvent{Type: api.EventStdout, Data: ev.GetStdout()})
		case ev.GetStderr() != nil:
			return send(api.ExecEvent{Type: api.EventStderr, Data: ev.GetStderr()})
		}
		return nil
	})
	if emitErr != nil {
		return nil // the caller left; the agent kills the command as the stream ends
	}
	if err != nil && !started {
		return err // nothing streamed yet: the caller answers with a status
	}
	ev := api.ExecEvent{Type: api.EventEnd}
	var note string
	if err != nil {
		ev.Error = &api.Error{Code: errdefs.Code(err), Message: err.Error()}
	} else {
		code := int(end.GetExitCode())
		ev.ExitCode, ev.Signal, ev.TimedOut, ev.SessionRestarted = &code, end.GetSignal(), end.GetTimedOut(), end.GetShellRestarted()
		if ev.TimedOut {
			note = fmt.Sprintf("paddock: command timed out after %s and was killed\n", timeout)
		}
		if end.GetNote() != "" {
			note += "paddock: " + end.GetNote() + "\n"
		}
	}
	if note != "" {
		_ = send(api.ExecEvent{Type: api.EventStderr, Data: []byte(note)})
	}
	_ = send(ev)
	return nil
}
