package paddock

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock/api"
)

// Health reports whether the daemon is up, its version and runtimes.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	var h api.Health
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/health"}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Create creates a sandbox and returns it once the daemon says it exists.
func (c *Client) Create(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	var sb api.Sandbox
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/sandboxes", jsonBody: req}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// Get returns one sandbox by id or name.
func (c *Client) Get(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodGet, id, "")
}

// Stop stops a sandbox's compute, keeping its files.
func (c *Client) Stop(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/stop")
}

// Start starts a stopped sandbox again.
func (c *Client) Start(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/start")
}

// Pause freezes a running sandbox: memory and processes are kept, and it
// uses no CPU until Resume (or the next request that needs it).
func (c *Client) Pause(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/pause")
}

// Hibernate writes a running or paused gVisor sandbox's memory and
// processes to disk and frees the host's memory and CPU; the sandbox is
// "hibernated" until Resume (or the next request that needs it) restores
// it where it was. A runc sandbox gets a FailedPrecondition error.
func (c *Client) Hibernate(ctx context.Context, id string) (*api.Sandbox, error) {
	p, err := sandboxPath(id, "/pause")
	if err != nil {
		return nil, err
	}
	var sb api.Sandbox
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: api.PauseRequest{ToDisk: true}}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// Resume thaws a paused sandbox, or restores a hibernated one.
func (c *Client) Resume(ctx context.Context, id string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, id, "/resume")
}

func (c *Client) sandboxCall(ctx context.Context, method, id, suffix string) (*api.Sandbox, error) {
	p, err := sandboxPath(id, suffix)
	if err != nil {
		return nil, err
	}
	var sb api.Sandbox
	if err := c.call(ctx, request{method: method, path: p}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// History returns a sandbox's recorded state changes, oldest first.
func (c *Client) History(ctx context.Context, id string) (*api.History, error) {
	p, err := sandboxPath(id, "/history")
	if err != nil {
		return nil, err
	}
	var h api.History
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Delete destroys a sandbox and everything in it.
func (c *Client) Delete(ctx context.Context, id string) error {
	p, err := sandboxPath(id, "")
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// List returns the sandboxes that carry every one of labels (all when
// labels is empty).
func (c *Client) List(ctx context.Context, labels map[string]string) ([]api.Sandbox, error) {
	q := url.Values{}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// The server splits each label at its first '=', so a key with one
		// would be misread.
		if k == "" || strings.Contains(k, "=") {
			return nil, fmt.Errorf("label key %q: must be non-empty and contain no '=': %w", k, ErrInvalidArgument)
		}
		q.Add("label", k+"="+labels[k])
	}
	var list api.SandboxList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/sandboxes", query: q}, &list); err != nil {
		return nil, err
	}
	return list.Sandboxes, nil
}
