package paddock

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// Network returns a sandbox's network mode and host rules.
func (c *Client) Network(ctx context.Context, id string) (*api.NetworkPolicy, error) {
	p, err := sandboxPath(id, "/network")
	if err != nil {
		return nil, err
	}
	var out api.NetworkPolicy
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetNetworkRules replaces an egress sandbox's host rules; they apply to
// its next connection and lookup.
func (c *Client) SetNetworkRules(ctx context.Context, id string, req api.UpdateNetworkRequest) (*api.NetworkPolicy, error) {
	p, err := sandboxPath(id, "/network")
	if err != nil {
		return nil, err
	}
	var out api.NetworkPolicy
	if err := c.call(ctx, request{method: http.MethodPut, path: p, jsonBody: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
