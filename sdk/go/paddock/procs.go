package paddock

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// Procs lists every process of a sandbox as its own /proc shows it, not
// only those Paddock started; the agent (PID 1) has Agent set.
func (c *Client) Procs(ctx context.Context, id string) (*api.ProcList, error) {
	p, err := sandboxPath(id, "/procs")
	if err != nil {
		return nil, err
	}
	var out api.ProcList
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// KillAll ends every process of a sandbox but its agent, without a
// restart; req.Grace sends SIGTERM first. The result says how many were
// killed and what, if anything, remains.
func (c *Client) KillAll(ctx context.Context, id string, req api.KillAllRequest) (*api.KillAllResult, error) {
	p, err := sandboxPath(id, "/procs/kill-all")
	if err != nil {
		return nil, err
	}
	var out api.KillAllResult
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
