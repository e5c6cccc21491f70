package paddock

import (
	"context"
	"fmt"
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// CreateKeyFormat creates an API key whose secret has the given format:
// api.KeyFormatPaddock ("pdk_...") or api.KeyFormatE2B ("e2b_...", for
// E2B_API_KEY when E2B's SDKs talk to Paddock). Its Secret is in the
// result and is never shown again.
func (c *Client) CreateKeyFormat(ctx context.Context, name, format string) (*api.CreatedKey, error) {
	if name == "" {
		return nil, fmt.Errorf("key name is empty: %w", ErrInvalidArgument)
	}
	var k api.CreatedKey
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/keys", jsonBody: api.CreateKeyRequest{Name: name, Format: format}}, &k)
	if err != nil {
		return nil, err
	}
	return &k, nil
}
