package paddock

import (
	"context"
	"fmt"
	"net/http"

	"github.com/paddock-dev/paddock/api"
)

// CreateKey creates an API key. Its Secret is in the result and is never
// shown again.
func (c *Client) CreateKey(ctx context.Context, name string) (*api.CreatedKey, error) {
	if name == "" {
		return nil, fmt.Errorf("key name is empty: %w", ErrInvalidArgument)
	}
	var k api.CreatedKey
	err := c.call(ctx, request{method: http.MethodPost, path: "/v1/keys", jsonBody: api.CreateKeyRequest{Name: name}}, &k)
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
