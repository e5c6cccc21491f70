package paddock

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// ExecOptions describes one command to run in a sandbox.
type ExecOptions struct {
	// Cmd is argv; Cmd[0] is looked up in PATH inside the sandbox.
	Cmd []string
	Env map[string]string
	Cwd string
	// User is "user" (the default) or "root".
	User string
	// Stdin, when set, is read fully (at most api.MaxExecStdin bytes) before
	// the command starts, then the command's stdin is closed.
	Stdin io.Reader
	// Timeout kills the command when it runs longer; 0 = the daemon default.
	Timeout time.Duration
	// Stdout and Stderr receive output as it arrives; nil discards it.
	Stdout, Stderr io.Writer
	// Session runs the command in that shell session (see CreateSession;
	// api.DefaultSession always exists): Cmd's words are joined with
	// spaces into shell text, so Cmd may be one string such as "cd /tmp".
	// Env, Cwd and Stdin are refused with a session.
	Session string
	// QueueTimeout bounds the wait behind the session's earlier commands;
	// 0 = the daemon's default (10m).
	QueueTimeout time.Duration
	// AllowHosts are granted to an egress sandbox while the command runs.
	AllowHosts []string
}

// ExecResult is how a command ended.
type ExecResult struct {
	// ExitCode is -1 when the process was killed by a signal.
	ExitCode int
	// Signal names the signal that killed the process, if one did.
	Signal string
	// OOMKilled is true when the kernel's OOM killer ended the process
	// (the sandbox ran out of memory).
	OOMKilled bool
	// TimedOut is true when the exec's timeout killed the process.
	TimedOut bool
	// SessionRestarted is true when the command left its session's shell
	// dead or stuck and a new shell replaced it (cwd and variables reset).
	SessionRestarted bool
	Pid              uint32
}

// Exec runs a command in a sandbox and waits for it to end, streaming its
// output to opts.Stdout and opts.Stderr. A non-zero exit is not an error:
// look at the result. An error means the command's real status is unknown.
func (c *Client) Exec(ctx context.Context, id string, opts ExecOptions) (*ExecResult, error) {
	p, err := sandboxPath(id, "/exec")
	if err != nil {
		return nil, err
	}
	req, err := execRequest(opts)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: p, jsonBody: req, accept: "application/x-ndjson"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	res, err := readExecStream(resp.Body, opts.Stdout, opts.Stderr)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	return res, nil
}

func execRequest(opts ExecOptions) (*api.ExecRequest, error) {
	if len(opts.Cmd) == 0 || opts.Cmd[0] == "" {
		return nil, fmt.Errorf("exec: no command given: %w", ErrInvalidArgument)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("exec: negative timeout %s: %w", opts.Timeout, ErrInvalidArgument)
	}
	req := &api.ExecRequest{Cmd: opts.Cmd, Env: opts.Env, Cwd: opts.Cwd, User: opts.User, Session: opts.Session, AllowHosts: opts.AllowHosts}
	if opts.QueueTimeout > 0 {
		req.QueueTimeout = opts.QueueTimeout.String()
	}
	if opts.Timeout > 0 {
		req.Timeout = opts.Timeout.String()
	}
	if opts.Stdin != nil {
		b, err := io.ReadAll(io.LimitReader(opts.Stdin, api.MaxExecStdin+1))
		if err != nil {
			return nil, fmt.Errorf("exec: read stdin: %v: %w", err, ErrInvalidArgument)
		}
		if len(b) > api.MaxExecStdin {
			return nil, fmt.Errorf("exec: stdin is larger than %d MiB; copy the data in as a file instead: %w", api.MaxExecStdin>>20, ErrInvalidArgument)
		}
		req.Stdin = b
	}
	return req, nil
}

// readExecStream consumes an exec NDJSON stream. It is separate from Exec
// so that the parser of untrusted input can be fuzzed on its own.
func readExecStream(r io.Reader, stdout, stderr io.Writer) (*ExecResult, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	er := newEventReader(r, MaxEventLine)
	res := &ExecResult{}
	for {
		var ev api.ExecEvent
		if err := er.nextOrEnd(&ev, "exec", "end"); err != nil {
			return nil, err
		}
		switch ev.Type {
		case api.EventStart:
			res.Pid = ev.Pid
		case api.EventStdout:
			if _, err := stdout.Write(ev.Data); err != nil {
				return nil, fmt.Errorf("exec: write stdout: %w", err)
			}
		case api.EventStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return nil, fmt.Errorf("exec: write stderr: %w", err)
			}
		case api.EventEnd:
			if ev.Error != nil {
				return nil, streamError(ev.Error)
			}
			if ev.ExitCode == nil {
				return nil, fmt.Errorf("exec: end event carries neither an exit code nor an error: %w", ErrUnavailable)
			}
			if ev.Pid != 0 && res.Pid == 0 {
				res.Pid = ev.Pid
			}
			res.ExitCode = *ev.ExitCode
			res.Signal = ev.Signal
			res.OOMKilled = ev.OOMKilled
			res.TimedOut = ev.TimedOut
			res.SessionRestarted = ev.SessionRestarted
			return res, nil
		default:
			// Unknown event types are newer than this client; skipping
			// them keeps old clients working against new daemons.
		}
	}
}
