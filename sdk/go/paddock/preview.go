package paddock

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/paddock-dev/paddock/api"
)

// Expose makes port of a sandbox reachable at a preview URL and returns
// it with its token. Exposing a port again replaces its token (the old URL
// stops working). The token is shown only here; the daemon keeps a hash.
func (c *Client) Expose(ctx context.Context, id string, port int) (*api.Preview, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range 1-65535: %w", port, ErrInvalidArgument)
	}
	p, err := sandboxPath(id, "/previews")
	if err != nil {
		return nil, err
	}
	var out api.Preview
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: api.ExposeRequest{Port: port}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Unexpose revokes the preview token of port; its URLs answer 404 from now.
func (c *Client) Unexpose(ctx context.Context, id string, port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d is out of range 1-65535: %w", port, ErrInvalidArgument)
	}
	p, err := sandboxPath(id, "/previews/"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// Previews lists a sandbox's exposed ports (tokens are not listed).
func (c *Client) Previews(ctx context.Context, id string) ([]api.Preview, error) {
	p, err := sandboxPath(id, "/previews")
	if err != nil {
		return nil, err
	}
	var out api.PreviewList
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &out); err != nil {
		return nil, err
	}
	return out.Previews, nil
}
