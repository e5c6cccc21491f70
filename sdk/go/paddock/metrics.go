package paddock

import (
	"context"
	"io"
	"net/http"
)

// Metrics writes the daemon's metrics, in the Prometheus text format, to w.
func (c *Client) Metrics(ctx context.Context, w io.Writer) error {
	return c.download(ctx, request{method: http.MethodGet, path: "/v1/metrics", accept: "text/plain"}, w)
}
