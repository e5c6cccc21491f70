package controller

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

// Session command queueing: how long a command may wait behind earlier
// ones by default, and at most.
const (
	defaultQueueTimeout = 10 * time.Minute
	maxQueueTimeout     = time.Hour
)

// CreateSession starts a shell session in a sandbox (starting a stopped
// sandbox first). Sessions live in the sandbox's agent: a stop or a
// restart of the sandbox ends them.
func (c *Controller) CreateSession(ctx context.Context, ref string, req api.CreateSessionRequest) (*api.Session, error) {
	if req.User != "" && !rules.ValidUser(req.User) {
		return nil, errdefs.Invalid("user %q is not a valid user name", req.User)
	}
	if err := rules.Env(req.Env); err != nil {
		return nil, err
	}
	if strings.ContainsRune(req.Cwd, 0) || len(req.Cwd) > 4096 {
		return nil, errdefs.Invalid("cwd is not a valid path")
	}
	return withAgent(ctx, c, ref, func(ag *client.Client) (*api.Session, error) {
		info, err := ag.CreateSession(ctx, &agentv1.CreateSessionRequest{Name: req.Name, User: req.User, Cwd: req.Cwd, Env: req.Env})
		if err != nil {
			return nil, err
		}
		s := sessionToAPI(info)
		return &s, nil
	})
}

// ListSessions lists a sandbox's sessions, oldest first.
func (c *Controller) ListSessions(ctx context.Context, ref string) ([]api.Session, error) {
	return withAgent(ctx, c, ref, func(ag *client.Client) ([]api.Session, error) {
		list, err := ag.ListSessions(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]api.Session, 0, len(list))
		for _, s := range list {
			out = append(out, sessionToAPI(s))
		}
		return out, nil
	})
}

// DeleteSession ends a session's shell and the jobs it started.
func (c *Controller) DeleteSession(ctx context.Context, ref, name string) error {
	_, err := withAgent(ctx, c, ref, func(ag *client.Client) (struct{}, error) {
		return struct{}{}, ag.DeleteSession(ctx, name)
	})
	return err
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

// sessionExec runs a command in a session with Exec's stream contract:
// one start, output, exactly one end with the real status or an error.
func (c *Controller) sessionExec(ctx context.Context, ref string, req api.ExecRequest, emit Emit) error {
	text, err := sessionCommand(&req)
	if err != nil {
		return err
	}
	timeout := c.cfg.ExecTimeout
	if req.Timeout != "" {
		if timeout, err = rules.ParseDuration("timeout", req.Timeout, time.Millisecond); err != nil {
			return err
		}
	}
	queue, err := QueueTimeout(req.QueueTimeout)
	if err != nil {
		return err
	}
	ag, sandboxID, done, err := c.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	// Recorded as an exec, with the session it ran in; the session's env
	// was given when it was created and is not the command's.
	l := ledger.NewCommand(api.LedgerExec, req.Cmd)
	l.User, l.Data["session"] = req.User, req.Session
	emit, recordExec := c.ledgerExec(ctx, sandboxID, l, emit)
	defer recordExec()

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
