package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// SetEgressUpstream points the agent's egress relay at the egress proxy's
// new address (IP:PORT) for the connections it takes from now on.
func (c *Client) SetEgressUpstream(ctx context.Context, upstream string) error {
	const op = "point the sandbox's egress relay at the proxy"
	body, err := json.Marshal(wire.EgressUpstream{Upstream: upstream})
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPut, wire.EgressUpstreamPath, "", url.Values{}, bytes.NewReader(body), "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return fmt.Errorf("%s: the sandbox's agent is older than the relay: %w", op, errdefs.ErrFailedPrecondition)
	default:
		return httpErr(op, resp)
	}
}
