package paddock

import (
	"context"

	"github.com/paddock-dev/paddock/api"
)

// CreateKeyFormat creates an API key whose secret has the given format:
// api.KeyFormatPaddock ("pdk_...") or api.KeyFormatE2B ("e2b_...", for
// E2B_API_KEY when E2B's SDKs talk to Paddock). Its Secret is in the
// result and is never shown again.
func (c *Client) CreateKeyFormat(ctx context.Context, name, format string) (*api.CreatedKey, error) {
	return c.CreateKeyWith(ctx, api.CreateKeyRequest{Name: name, Format: format})
}
