package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/process"
)

// PTYOptions describe a process started on a terminal.
type PTYOptions struct {
	Cmd        []string
	Env        map[string]string
	Cwd        string
	User       string
	Cols, Rows int
	Tag        string // names the process for ConnectPTY (terminals.go)
}

// PTYEvent is one event of a terminal process: its pid once, output
// chunks, then its end.
type PTYEvent struct {
	Pid    uint32
	Data   []byte
	End    bool
	Exit   int    // -1 when killed by a signal
	Signal string // e.g. "SIGKILL"
}

// PTYStream follows a terminal process. Next blocks for the next event;
// it returns an error when the stream breaks (the sandbox stopped) or ctx
// ends. Close ends following; the process keeps running.
type PTYStream struct {
	stream ptyEvents
	ctx    context.Context
}

// ptyEvents is the part of a Start or Connect stream PTYStream reads.
type ptyEvents interface {
	Receive() bool
	Err() error
	Close() error
	event() *process.ProcessEvent
}

type startEvents struct {
	*connect.ServerStreamForClient[process.StartResponse]
}

func (s startEvents) event() *process.ProcessEvent { return s.Msg().GetEvent() }

// StartPTY starts o.Cmd on a new terminal of the given size and follows it.
// The stream lives as long as ctx.
func (c *Client) StartPTY(ctx context.Context, o PTYOptions) (*PTYStream, uint32, error) {
	if len(o.Cmd) == 0 || o.Cmd[0] == "" {
		return nil, 0, errdefs.Invalid("a command is required")
	}
	cfg := &process.ProcessConfig{Cmd: o.Cmd[0], Args: o.Cmd[1:], Envs: o.Env}
	if o.Cwd != "" {
		cfg.Cwd = &o.Cwd
	}
	req := connect.NewRequest(&process.StartRequest{Process: cfg,
		Pty: &process.PTY{Size: &process.PTY_Size{Cols: uint32(o.Cols), Rows: uint32(o.Rows)}}})
	if o.Tag != "" {
		req.Msg.Tag = &o.Tag
	}
	SetUser(req.Header(), o.User)
	stream, err := c.Process().Start(ctx, req)
	if err != nil {
		return nil, 0, rpcErr(ctx, "start terminal", err)
	}
	// The agent sends the start event first, or fails the stream with the
	// reason the process could not start.
	return firstPTYEvent(&PTYStream{stream: startEvents{stream}, ctx: ctx}, stream.Close, "start terminal")
}

// firstPTYEvent reads a new stream's start event and returns the stream
// with the terminal's pid, closing it when the start does not come.
func firstPTYEvent(s *PTYStream, closeStream func() error, what string) (*PTYStream, uint32, error) {
	ev, err := s.Next()
	if err != nil {
		_ = closeStream()
		return nil, 0, err
	}
	if ev.Pid == 0 {
		_ = closeStream()
		return nil, 0, fmt.Errorf("%s: agent sent no start event: %w", what, errdefs.ErrUnavailable)
	}
	return s, ev.Pid, nil
}

// Next returns the next start, data or end event, skipping keepalives.
func (s *PTYStream) Next() (PTYEvent, error) {
	for s.stream.Receive() {
		switch e := s.stream.event().GetEvent().(type) {
		case *process.ProcessEvent_Start:
			return PTYEvent{Pid: e.Start.GetPid()}, nil
		case *process.ProcessEvent_Data:
			if b := e.Data.GetPty(); len(b) > 0 {
				return PTYEvent{Data: b}, nil
			}
		case *process.ProcessEvent_End:
			ev := PTYEvent{End: true, Exit: int(e.End.GetExitCode())}
			if !e.End.GetExited() {
				ev.Exit, ev.Signal = -1, signalName(e.End.GetStatus())
			}
			return ev, nil
		}
	}
	err := s.stream.Err()
	if err == nil {
		return PTYEvent{}, fmt.Errorf("terminal stream ended without an end event: %w", errdefs.ErrUnavailable)
	}
	return PTYEvent{}, rpcErr(s.ctx, "terminal", err)
}

// Close stops following.
func (s *PTYStream) Close() error { return s.stream.Close() }

func pidSelector(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

// PTYInput writes p to the terminal of process pid.
func (c *Client) PTYInput(ctx context.Context, pid uint32, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), stdinChunk)
		req := connect.NewRequest(&process.SendInputRequest{Process: pidSelector(pid),
			Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: p[:n]}}})
		if _, err := c.Process().SendInput(ctx, req); err != nil {
			return rpcErr(ctx, "terminal input", err)
		}
		p = p[n:]
	}
	return nil
}

// PTYResize sets the terminal size of process pid.
func (c *Client) PTYResize(ctx context.Context, pid uint32, cols, rows int) error {
	req := connect.NewRequest(&process.UpdateRequest{Process: pidSelector(pid),
		Pty: &process.PTY{Size: &process.PTY_Size{Cols: uint32(cols), Rows: uint32(rows)}}})
	if _, err := c.Process().Update(ctx, req); err != nil {
		return rpcErr(ctx, "resize terminal", err)
	}
	return nil
}

// Signal sends SIGTERM or SIGKILL to the process group of pid.
func (c *Client) Signal(ctx context.Context, pid uint32, kill bool) error {
	sig := process.Signal_SIGNAL_SIGTERM
	if kill {
		sig = process.Signal_SIGNAL_SIGKILL
	}
	req := connect.NewRequest(&process.SendSignalRequest{Process: pidSelector(pid), Signal: sig})
	if _, err := c.Process().SendSignal(ctx, req); err != nil {
		return rpcErr(ctx, "signal", err)
	}
	return nil
}
