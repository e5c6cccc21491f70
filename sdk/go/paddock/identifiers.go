package paddock

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// IdentifierSandbox returns the sandbox bound to identifier in a warm pool,
// allocating one from the pool and binding it on first use (the identifier
// API in the style of Azure's dynamic sessions). Use its ID with every other
// method; the daemon also serves each sandbox route under
// /v1/pools/{pool}/identifiers/{identifier}/.
func (c *Client) IdentifierSandbox(ctx context.Context, pool, identifier string) (*api.Sandbox, error) {
	p, err := nameSegment("pool name", pool)
	if err != nil {
		return nil, err
	}
	id, err := nameSegment("identifier", identifier)
	if err != nil {
		return nil, err
	}
	var out api.Sandbox
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/pools/" + p + "/identifiers/" + id}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
