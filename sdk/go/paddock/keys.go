package paddock

import (
	"context"
	"fmt"
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// CreateKey creates an API key of the daemon's default scope (own: it sees
// only what it creates). Its Secret is in the result and is never shown
// again.
func (c *Client) CreateKey(ctx context.Context, name string) (*api.CreatedKey, error) {
	return c.CreateKeyWith(ctx, api.CreateKeyRequest{Name: name})
}

// CreateKeyWith creates an API key with every option of
// api.CreateKeyRequest: its format and its scope (api.KeyScopeOwn, the
// default, or api.KeyScopeAll). Its Secret is in the result and is never
// shown again.
func (c *Client) CreateKeyWith(ctx context.Context, req api.CreateKeyRequest) (*api.CreatedKey, error) {
	if req.Name == "" {
		return nil, fmt.Errorf("key name is empty: %w", ErrInvalidArgument)
	}
	var k api.CreatedKey
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/keys", jsonBody: req}, &k)
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// ListKeys returns every API key's public record.
func (c *Client) ListKeys(ctx context.Context) ([]api.Key, error) {
	var list api.KeyList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/keys"}, &list); err != nil {
		return nil, err
	}
	return list.Keys, nil
}

// DeleteKey revokes an API key.
func (c *Client) DeleteKey(ctx context.Context, id string) error {
	e, err := escapeRef("key id", id)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/keys/" + e}, nil)
}
