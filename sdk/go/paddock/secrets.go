package paddock

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/paddock-dev/paddock/api"
)

// SetSecret stores a secret (creating or replacing it) for credential
// injection. The daemon keeps it encrypted and never returns it; it is
// used only by the egress proxy, on the way to an upstream.
func (c *Client) SetSecret(ctx context.Context, name string, value []byte) (*api.Secret, error) {
	e, err := escapeRef("secret name", name)
	if err != nil {
		return nil, err
	}
	if len(value) == 0 {
		return nil, fmt.Errorf("secret value is empty: %w", ErrInvalidArgument)
	}
	var out api.Secret
	err = c.call(ctx, request{method: http.MethodPut, path: "/v1/secrets/" + e, jsonBody: api.SetSecretRequest{Value: string(value)}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSecret returns the caller's secret of that name: its times and the
// sandboxes whose rules use it, never its value. Secret names are per
// API key: another key's secret of the same name is ErrNotFound.
func (c *Client) GetSecret(ctx context.Context, name string) (*api.Secret, error) {
	e, err := escapeRef("secret name", name)
	if err != nil {
		return nil, err
	}
	var out api.Secret
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/secrets/" + e}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSecrets returns every secret's name, times and users (never values).
func (c *Client) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	var list api.SecretList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/secrets"}, &list); err != nil {
		return nil, err
	}
	return list.Secrets, nil
}

// DeleteSecret removes a secret; ErrConflict while an injection rule uses it.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	e, err := escapeRef("secret name", name)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/secrets/" + e}, nil)
}

// SetInjection adds a credential injection rule to an egress sandbox (or
// replaces the one for the same host and header): its HTTPS requests to
// the host get the header, with {{secret:NAME}} in the value replaced by
// the secret.
func (c *Client) SetInjection(ctx context.Context, id string, in api.Injection) (*api.NetworkPolicy, error) {
	p, err := sandboxPath(id, "/network/injections")
	if err != nil {
		return nil, err
	}
	var out api.NetworkPolicy
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: in}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveInjection removes a sandbox's injection rules for host: every
// header's, or only header's when it is not empty.
func (c *Client) RemoveInjection(ctx context.Context, id, host, header string) (*api.NetworkPolicy, error) {
	p, err := sandboxPath(id, "/network/injections")
	if err != nil {
		return nil, err
	}
	if host == "" {
		return nil, fmt.Errorf("host is empty: %w", ErrInvalidArgument)
	}
	q := url.Values{"host": {host}}
	if header != "" {
		q.Set("header", header)
	}
	var out api.NetworkPolicy
	if err := c.call(ctx, request{method: http.MethodDelete, path: p, query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
