package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

const (
	// maxProcsAnswer bounds the agent's answer: MaxProcs records with
	// command lines of at most MaxProcCmdBytes, JSON-escaped.
	maxProcsAnswer = 32 << 20
)

// Procs lists every process of the sandbox, as its /proc shows them.
func (c *Client) Procs(ctx context.Context) (*api.ProcList, error) {
	var out api.ProcList
	if err := c.procsCall(ctx, http.MethodGet, wire.ProcsPath, url.Values{}, "list the sandbox's processes", &out); err != nil {
		return nil, err
	}
	if len(out.Procs) > api.MaxProcs {
		out.Procs, out.Truncated = out.Procs[:api.MaxProcs], true
	}
	return &out, nil
}

// KillAll ends every process of the sandbox but the agent; grace > 0
// sends SIGTERM first and waits up to grace before SIGKILL.
func (c *Client) KillAll(ctx context.Context, grace time.Duration) (*api.KillAllResult, error) {
	q := url.Values{}
	if grace > 0 {
		q.Set("grace", grace.String())
	}
	var out api.KillAllResult
	if err := c.procsCall(ctx, http.MethodPost, wire.KillAllPath, q, "kill the sandbox's processes", &out); err != nil {
		return nil, err
	}
	if len(out.Remaining) > api.MaxProcs {
		out.Remaining = out.Remaining[:api.MaxProcs]
	}
	if out.Remaining == nil {
		out.Remaining = []api.Proc{}
	}
	return &out, nil
}

func (c *Client) procsCall(ctx context.Context, method, path string, q url.Values, op string, out any) error {
	resp, err := c.do(ctx, method, path, "", q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		// An agent sealed by an older daemon lacks the route; a restart
		// of the sandbox gives it the current agent.
		return fmt.Errorf("%s: the sandbox's agent is older than this feature; stop and start the sandbox to update it: %w",
			op, errdefs.ErrFailedPrecondition)
	default:
		return httpErr(op, resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxProcsAnswer)).Decode(out); err != nil {
		return fmt.Errorf("%s: bad answer from the agent: %v: %w", op, err, errdefs.ErrUnavailable)
	}
	return nil
}

// Usage reads the sandbox's CPU, memory and disk use as its agent sees
// them (wire.UsagePath).
func (c *Client) Usage(ctx context.Context) (wire.Usage, error) {
	var out wire.Usage
	err := c.procsCall(ctx, http.MethodGet, wire.UsagePath, url.Values{}, "read the sandbox's usage", &out)
	return out, err
}
