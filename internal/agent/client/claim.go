package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Claim gives the unclaimed agent of a warm pool's pod at addr the token
// it answers to from then on, proving the pool's token (internal/agent,
// claim.go). It waits, until ctx ends, for an agent that is still
// starting. A claim retried after one that went through is fine: an agent
// that already answers to token counts as claimed. One that answers to
// neither was claimed by someone else and must not be used: ErrConflict.
func Claim(ctx context.Context, addr, poolToken, token string) error {
	pc := NewTCP(addr, poolToken)
	defer pc.Close()
	pc.init()
	body, err := json.Marshal(wire.ClaimRequest{Token: token})
	if err != nil {
		return err
	}
	delay := 5 * time.Millisecond
	for {
		code, err := postClaim(ctx, pc, body)
		switch {
		case err == nil && code == http.StatusNoContent:
			return nil
		case err == nil && (code == http.StatusConflict || code == http.StatusUnauthorized):
			// Claimed already: by us (a retry) if our token works.
			tc := NewTCP(addr, token)
			tc.init()
			herr := tc.health(ctx)
			tc.Close()
			if herr == nil {
				return nil
			}
			return fmt.Errorf("the agent at %s was claimed by someone else (it answered %d and does not take the sandbox's token): %w", addr, code, errdefs.ErrConflict)
		case err == nil:
			return fmt.Errorf("the agent at %s refused its claim with %d: %w", addr, code, errdefs.ErrFailedPrecondition)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctxError(ctx, fmt.Errorf("claim the agent at %s: %w", addr, err))
		case <-t.C:
		}
		delay = min(delay*3/2, 200*time.Millisecond)
	}
}

func postClaim(ctx context.Context, c *Client, body []byte) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, baseURL+wire.ClaimPath, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, nil
}
