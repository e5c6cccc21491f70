package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// Output stream numbers passed to onOutput.
const (
	Stdout = 1
	Stderr = 2
)

// Timing of the kill that follows a cancelled Exec.
const (
	killTimeout = 5 * time.Second
	endGrace    = 3 * time.Second
	// stdinChunk keeps each SendInput well under the agent's message cap.
	stdinChunk = 1 << 20
)

// ExecOptions describe one command. User "" is the agent's default user.
type ExecOptions struct {
	Cmd   []string // argv; Cmd[0] is looked up in PATH inside the sandbox
	Env   map[string]string
	Cwd   string
	User  string
	Stdin []byte // nil: no stdin
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int    // -1 if killed by a signal
	Signal   string // e.g. "SIGKILL"
	Pid      uint32
}

// Exec runs a command to completion, calling onStart once with the pid and
// onOutput for each chunk (Stdout or Stderr) in order, never holding the
// whole output. When ctx ends first, the process group is killed and Exec
// returns ctx's error (a deadline wrapped in errdefs.ErrDeadlineExceeded).
// A command that does not exist is an error wrapping errdefs.ErrNotFound.
func (c *Client) Exec(ctx context.Context, o ExecOptions, onStart func(pid uint32), onOutput func(stream int, p []byte) error) (ExecResult, error) {
	res := ExecResult{ExitCode: -1}
	if len(o.Cmd) == 0 || o.Cmd[0] == "" {
		return res, errdefs.Invalid("a command is required")
	}
	if err := ctx.Err(); err != nil {
		return res, ctxError(ctx, nil)
	}
	wantStdin := o.Stdin != nil
	cfg := &process.ProcessConfig{Cmd: o.Cmd[0], Args: o.Cmd[1:], Envs: o.Env}
	if o.Cwd != "" {
		cfg.Cwd = &o.Cwd
	}
	req := connect.NewRequest(&process.StartRequest{Process: cfg, Stdin: &wantStdin})
	SetUser(req.Header(), o.User)

	// The stream outlives ctx on purpose: after a cancel the end event
	// (the process's real status) should still arrive.
	streamCtx, cancelStream := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStream()
	stream, err := c.Process().Start(streamCtx, req)
	if err != nil {
		return res, rpcErr(ctx, "exec", err)
	}
	defer stream.Close()

	started := make(chan uint32, 1)
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		var pid uint32
		select {
		case pid = <-started:
		case <-watchDone:
			return
		case <-ctx.Done():
		}
		select {
		case <-ctx.Done():
		case <-watchDone:
			return
		}
		if pid == 0 {
			select {
			case pid = <-started:
			case <-time.After(endGrace):
			case <-watchDone:
				return
			}
		}
		if pid != 0 {
			c.kill(ctx, pid, o.User)
		}
		select {
		case <-time.After(endGrace):
			cancelStream()
		case <-watchDone:
		}
	}()

	stdinErr := make(chan error, 1)
	gotStart, gotEnd := false, false
	var outErr error
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			if gotStart {
				continue
			}
			gotStart = true
			res.Pid = e.Start.GetPid()
			started <- res.Pid
			if onStart != nil {
				onStart(res.Pid)
			}
			if wantStdin {
				// Fed beside the output loop: a process that writes before
				// it reads would otherwise deadlock against us.
				go func(pid uint32) {
					err := c.feedStdin(ctx, pid, o.User, o.Stdin)
					if err != nil && ctx.Err() == nil {
						c.kill(ctx, pid, o.User)
					}
					stdinErr <- err
				}(res.Pid)
			}
		case *process.ProcessEvent_Data:
			if outErr != nil || onOutput == nil {
				continue
			}
			var err error
			switch d := e.Data.GetOutput().(type) {
			case *process.ProcessEvent_DataEvent_Stdout:
				err = onOutput(Stdout, d.Stdout)
			case *process.ProcessEvent_DataEvent_Stderr:
				err = onOutput(Stderr, d.Stderr)
			case *process.ProcessEvent_DataEvent_Pty:
				err = onOutput(Stdout, d.Pty)
			}
			if err != nil {
				// The caller cannot take more output: stop the command
				// rather than let it run unobserved.
				outErr = err
				c.kill(ctx, res.Pid, o.User)
			}
		case *process.ProcessEvent_End:
			gotEnd = true
			res.ExitCode = int(e.End.GetExitCode())
			if !e.End.GetExited() {
				res.ExitCode = -1
				res.Signal = signalName(e.End.GetStatus())
			}
			if e.End.Error != nil && e.End.GetError() != "" && outErr == nil {
				outErr = fmt.Errorf("exec: %s", e.End.GetError())
			}
		}
		if gotEnd {
			break
		}
	}
	if ctx.Err() != nil {
		return res, ctxError(ctx, nil)
	}
	if outErr != nil {
		return res, outErr
	}
	select {
	case err := <-stdinErr:
		if err != nil {
			return res, err
		}
	default:
	}
	if err := stream.Err(); err != nil {
		return res, rpcErr(ctx, "exec", err)
	}
	if !gotEnd {
		return res, fmt.Errorf("exec: the agent closed the stream without an end event: %w", errdefs.ErrUnavailable)
	}
	return res, nil
}

// kill sends SIGKILL to the process group on its own short deadline: the
// caller's context is typically already over.
func (c *Client) kill(ctx context.Context, pid uint32, user string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	req := connect.NewRequest(&process.SendSignalRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
		Signal:  process.Signal_SIGNAL_SIGKILL,
	})
	SetUser(req.Header(), user)
	_, _ = c.Process().SendSignal(kctx, req)
}

func (c *Client) feedStdin(ctx context.Context, pid uint32, user string, data []byte) error {
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	for len(data) > 0 {
		n := min(len(data), stdinChunk)
		req := connect.NewRequest(&process.SendInputRequest{
			Process: sel,
			Input:   &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data[:n]}},
		})
		SetUser(req.Header(), user)
		if _, err := c.Process().SendInput(ctx, req); err != nil {
			// A process that exits without reading its input is not an
			// error of the exec.
			if errors.Is(rpcErr(ctx, "stdin", err), errdefs.ErrFailedPrecondition) ||
				errors.Is(rpcErr(ctx, "stdin", err), errdefs.ErrNotFound) {
				return nil
			}
			return rpcErr(ctx, "stdin", err)
		}
		data = data[n:]
	}
	req := connect.NewRequest(&process.CloseStdinRequest{Process: sel})
	SetUser(req.Header(), user)
	if _, err := c.Process().CloseStdin(ctx, req); err != nil {
		err = rpcErr(ctx, "close stdin", err)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// signalName turns envd's status ("signal: killed") into "SIGKILL".
func signalName(status string) string {
	desc, ok := strings.CutPrefix(status, "signal: ")
	if !ok {
		return ""
	}
	desc = strings.TrimSuffix(desc, " (core dumped)")
	for i := 1; i < 65; i++ {
		sig := syscall.Signal(i)
		if sig.String() == desc {
			if name := unix.SignalName(sig); name != "" {
				return name
			}
		}
	}
	return ""
}
