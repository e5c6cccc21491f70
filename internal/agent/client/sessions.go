package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/errdefs"
	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1/agentv1connect"
)

// maxAgentMessage bounds one message from the agent: the sandbox controls
// the agent's answers, and must not make the daemon buffer without end.
// Output chunks are at most 32 KiB; lists of processes are the largest.
const maxAgentMessage = 32 << 20

func (c *Client) sessions() agentv1connect.SessionServiceClient {
	c.init()
	return agentv1connect.NewSessionServiceClient(c.hc, baseURL, connect.WithReadMaxBytes(maxAgentMessage))
}

func (c *Client) background() agentv1connect.ProcessServiceClient {
	c.init()
	return agentv1connect.NewProcessServiceClient(c.hc, baseURL, connect.WithReadMaxBytes(maxAgentMessage))
}

// CreateSession starts a shell session in the sandbox.
func (c *Client) CreateSession(ctx context.Context, req *agentv1.CreateSessionRequest) (*agentv1.SessionInfo, error) {
	resp, err := c.sessions().CreateSession(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr(ctx, "create session", err)
	}
	return resp.Msg.GetSession(), nil
}

// ListSessions lists the sandbox's sessions, oldest first.
func (c *Client) ListSessions(ctx context.Context) ([]*agentv1.SessionInfo, error) {
	resp, err := c.sessions().ListSessions(ctx, connect.NewRequest(&agentv1.ListSessionsRequest{}))
	if err != nil {
		return nil, rpcErr(ctx, "list sessions", err)
	}
	return resp.Msg.GetSessions(), nil
}

// DeleteSession ends a session's shell and what it started.
func (c *Client) DeleteSession(ctx context.Context, name string) error {
	_, err := c.sessions().DeleteSession(ctx, connect.NewRequest(&agentv1.DeleteSessionRequest{Name: name}))
	return rpcErr(ctx, "delete session", err)
}

// ExecInSession runs a command in a session, passing every event but
// keepalives to onEvent, and returns the end event. An error means the
// command's end was not learned (or it never started).
func (c *Client) ExecInSession(ctx context.Context, req *agentv1.SessionExecRequest, onEvent func(*agentv1.SessionExecEvent) error) (*agentv1.SessionExecEvent_End, error) {
	stream, err := c.sessions().ExecInSession(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr(ctx, "session exec", err)
	}
	return untilEnd(ctx, "session exec", stream, func(ev *agentv1.SessionExecEvent) bool { return ev.GetKeepalive() != nil },
		(*agentv1.SessionExecEvent).GetEnd, onEvent)
}

// untilEnd reads a stream of the agent's events up to its end event,
// passing every event but keepalives to onEvent. A stream that stops
// before its end event is an error: the end was never learned.
func untilEnd[M any, E comparable](ctx context.Context, op string, stream *connect.ServerStreamForClient[M],
	keepalive func(*M) bool, end func(*M) E, onEvent func(*M) error) (E, error) {
	var zero E
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg()
		if keepalive(ev) {
			continue
		}
		if err := onEvent(ev); err != nil {
			return zero, err
		}
		if e := end(ev); e != zero {
			return e, nil
		}
	}
	if err := stream.Err(); err != nil {
		return zero, rpcErr(ctx, op, err)
	}
	return zero, fmt.Errorf("%s: the agent ended the stream without an end event: %w", op, errdefs.ErrUnavailable)
}

// StartBackground starts a background process.
func (c *Client) StartBackground(ctx context.Context, req *agentv1.StartProcessRequest) (*agentv1.BackgroundProcess, error) {
	resp, err := c.background().StartProcess(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr(ctx, "start process", err)
	}
	return resp.Msg.GetProcess(), nil
}

// ListBackground lists background processes, running and ended.
func (c *Client) ListBackground(ctx context.Context) ([]*agentv1.BackgroundProcess, error) {
	resp, err := c.background().ListProcesses(ctx, connect.NewRequest(&agentv1.ListProcessesRequest{}))
	if err != nil {
		return nil, rpcErr(ctx, "list processes", err)
	}
	return resp.Msg.GetProcesses(), nil
}

// GetBackground describes one background process by id or pid.
func (c *Client) GetBackground(ctx context.Context, ref string) (*agentv1.BackgroundProcess, error) {
	resp, err := c.background().GetProcess(ctx, connect.NewRequest(&agentv1.GetProcessRequest{Id: ref}))
	if err != nil {
		return nil, rpcErr(ctx, "get process", err)
	}
	return resp.Msg.GetProcess(), nil
}

// KillBackground signals a background process (and SIGKILLs it after the
// grace period) and returns its record.
func (c *Client) KillBackground(ctx context.Context, req *agentv1.KillProcessRequest) (*agentv1.BackgroundProcess, error) {
	resp, err := c.background().KillProcess(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr(ctx, "kill process", err)
	}
	return resp.Msg.GetProcess(), nil
}

// WaitBackground waits for a condition on a background process.
func (c *Client) WaitBackground(ctx context.Context, req *agentv1.WaitProcessRequest) (*agentv1.WaitProcessResponse, error) {
	resp, err := c.background().WaitProcess(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr(ctx, "wait", err)
	}
	return resp.Msg, nil
}

// BackgroundLogs streams a background process's kept output (and, with
// follow, new output until it ends) to onEvent, keepalives left out.
func (c *Client) BackgroundLogs(ctx context.Context, req *agentv1.ProcessLogsRequest, onEvent func(*agentv1.ProcessLogsEvent) error) error {
	stream, err := c.background().ProcessLogs(ctx, connect.NewRequest(req))
	if err != nil {
		return rpcErr(ctx, "logs", err)
	}
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg()
		if ev.GetKeepalive() != nil {
			continue
		}
		if err := onEvent(ev); err != nil {
			return err
		}
	}
	return rpcErr(ctx, "logs", stream.Err())
}
