package client

import (
	"context"

	"connectrpc.com/connect"

	agentv1 "github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1"
	"github.com/paddock-dev/paddock/proto/gen/paddock/agent/v1/agentv1connect"
)

func (c *Client) codeContexts() agentv1connect.CodeContextServiceClient {
	c.init()
	return agentv1connect.NewCodeContextServiceClient(c.hc, baseURL, connect.WithReadMaxBytes(maxAgentMessage))
}

// CreateContext starts an interpreter context in the sandbox.
func (c *Client) CreateContext(ctx context.Context, req *agentv1.CreateContextRequest) (*agentv1.CodeContextInfo, error) {
	resp, err := c.codeContexts().CreateContext(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr(ctx, "create context", err)
	}
	return resp.Msg.GetContext(), nil
}

// ListContexts lists the sandbox's code contexts, oldest first.
func (c *Client) ListContexts(ctx context.Context) ([]*agentv1.CodeContextInfo, error) {
	resp, err := c.codeContexts().ListContexts(ctx, connect.NewRequest(&agentv1.ListContextsRequest{}))
	if err != nil {
		return nil, rpcErr(ctx, "list contexts", err)
	}
	return resp.Msg.GetContexts(), nil
}

// DeleteContext ends a context's interpreter.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	_, err := c.codeContexts().DeleteContext(ctx, connect.NewRequest(&agentv1.DeleteContextRequest{Id: id}))
	return rpcErr(ctx, "delete context", err)
}

// RunCode runs code in a context, passing every event but keepalives to
// onEvent, and returns the end event.
func (c *Client) RunCode(ctx context.Context, req *agentv1.RunCodeRequest, onEvent func(*agentv1.RunCodeEvent) error) (*agentv1.RunCodeEvent_End, error) {
	stream, err := c.codeContexts().RunCode(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr(ctx, "run code", err)
	}
	return untilEnd(ctx, "run code", stream, func(ev *agentv1.RunCodeEvent) bool { return ev.GetKeepalive() != nil },
		(*agentv1.RunCodeEvent).GetEnd, onEvent)
}
