package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/ledger"
)

// ExitCommandNotFound is what a shell reports for a missing command; exec
// reports the same so scripts behave as they would locally.
const ExitCommandNotFound = 127

// Emit receives exec events in order. An error from it (the caller went
// away) ends the exec and kills the process.
type Emit func(api.ExecEvent) error

// Exec runs a command in a sandbox to completion, streaming its output.
// The stream always ends with exactly one end event carrying the real exit
// status or an error; Exec returns an error only when nothing was emitted
// (bad request, sandbox missing), so the caller can answer with a status.
func (c *Controller) Exec(ctx context.Context, ref string, req api.ExecRequest, emit Emit) error {
	if req.Session != "" || req.QueueTimeout != "" {
		if len(req.AllowHosts) > 0 {
			return errdefs.Invalid("allow_hosts cannot be granted to a session command")
		}
		return c.sessions.Exec(ctx, ref, req, emit) // internal/controller/sessions
	}
	if err := rules.Exec(&req); err != nil {
		return err
	}
	timeout := c.cfg.ExecTimeout
	if req.Timeout != "" {
		d, err := rules.ParseDuration("timeout", req.Timeout, time.Millisecond)
		if err != nil {
			return err
		}
		timeout = d
	}
	ag, sandboxID, done, err := c.Agent(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	revoke, err := c.grantHosts(ctx, sandboxID, req.AllowHosts) // network.go
	if err != nil {
		return err
	}
	defer revoke()
	l := ledger.NewCommand(api.LedgerExec, req.Cmd)
	l.User, l.Cwd, l.Env = req.User, req.Cwd, req.Env
	emit, recordExec := c.ledgerExec(ctx, sandboxID, l, emit)
	defer recordExec()

	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var emitErr error
	send := func(ev api.ExecEvent) error {
		if emitErr != nil {
			return emitErr
		}
		if err := emit(ev); err != nil {
			emitErr = err
			cancel() // the caller is gone: stop the process
			return err
		}
		return nil
	}
	oom := c.oomWatch(sandboxID) // death.go
	started := false
	res, err := ag.Exec(ectx, client.ExecOptions{
		Cmd: req.Cmd, Env: req.Env, Cwd: req.Cwd, User: req.User, Stdin: req.Stdin,
	}, func(pid uint32) {
		started = true
		_ = send(api.ExecEvent{Type: api.EventStart, Pid: pid})
	}, func(stream int, p []byte) error {
		typ := api.EventStdout
		if stream == 2 {
			typ = api.EventStderr
		}
		return send(api.ExecEvent{Type: typ, Data: p})
	})
	// The command's grant ends before the caller hears that the command
	// ended (the deferred call would run after the end event and the
	// ledger write): a command the caller starts next must not find it.
	revoke()
	if emitErr != nil {
		return nil // nobody is listening for the end any more
	}
	end := api.ExecEvent{Type: api.EventEnd}
	var note string
	if err == nil && res.Signal != "" {
		// Killed by a signal because its sandbox is being destroyed: the
		// caller hears that, not only the signal.
		if derr := c.destroyedMeanwhile(ctx, sandboxID); derr != nil {
			err = derr
		}
	}
	switch {
	case err == nil:
		code := res.ExitCode
		end.ExitCode = &code
		end.Signal = res.Signal
		end.OOMKilled = res.Signal == "SIGKILL" && oom()
	case errors.Is(err, errdefs.ErrNotFound) && !started:
		code := ExitCommandNotFound
		end.ExitCode = &code
		note = fmt.Sprintf("paddock: %s: command not found\n", req.Cmd[0])
	case errors.Is(ectx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		code := -1
		end.ExitCode = &code
		end.Signal = "SIGKILL"
		end.TimedOut = true
		note = fmt.Sprintf("paddock: command timed out after %s and was killed\n", timeout)
	case !started && ctx.Err() == nil:
		// nothing streamed yet: the caller answers with a status
		return c.explainBrokenAgent(ctx, sandboxID, err) // death.go
	default:
		err = c.explainBrokenAgent(ctx, sandboxID, err)
		end.Error = &api.Error{Code: errdefs.Code(err), Message: err.Error()}
	}
	if !started {
		_ = send(api.ExecEvent{Type: api.EventStart})
	}
	if note != "" {
		_ = send(api.ExecEvent{Type: api.EventStderr, Data: []byte(note)})
	}
	_ = send(end)
	return nil
}
