package paddock

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// Info says what the daemon offers: the runtimes it probed at start (and
// why any is unusable), the size presets, the host's limits and the
// defaults a create gets.
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	var in api.Info
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/info"}, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Policy returns the admission policy in force.
func (c *Client) Policy(ctx context.Context) (*api.Policy, error) {
	var p api.Policy
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/policy"}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// SetPolicy replaces the admission policy; only the unix socket's caller
// may (an API key gets ErrPermissionDenied). Later creates are checked
// against it; existing sandboxes are left alone.
func (c *Client) SetPolicy(ctx context.Context, p api.Policy) (*api.Policy, error) {
	var out api.Policy
	if err := c.call(ctx, request{method: http.MethodPut, path: "/v1/policy", jsonBody: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
