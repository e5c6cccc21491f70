package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

const (
	// portHandshakeTimeout bounds the upgrade exchange; the agent's own
	// dial timeout is shorter, so a slow port still gets its answer.
	portHandshakeTimeout = 20 * time.Second
)

// DialPort connects to TCP port on the sandbox's loopback through the
// agent, so it works for sandboxes without any network. The connection is
// a plain byte stream to the port. Nothing listening there is an error
// wrapping errdefs.ErrUnavailable whose message says so.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.Invalid("port %d is out of range: want 1 to 65535", port)
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx, nil)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx, nil)
		}
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = conn.Close()
		}
	}()
	deadline := time.Now().Add(portHandshakeTimeout)
	if d, has := ctx.Deadline(); has && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req, err := http.NewRequest(http.MethodGet, baseURL+wire.PortForwardPath+"?port="+strconv.Itoa(port), nil)
	if err != nil {
		return nil, errdefs.Invalid("build request: %v", err)
	}
	if c.token != "" {
		req.Header.Set(wire.TokenHeader, c.token)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", wire.PortForwardProtocol)
	if err := req.Write(conn); err != nil {
		return nil, c.dialPortErr(ctx, port, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, c.dialPortErr(ctx, port, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, httpErr(fmt.Sprintf("port %d", port), resp)
	}
	if !stop() {
		return nil, ctxError(ctx, nil)
	}
	_ = conn.SetDeadline(time.Time{})
	ok = true
	return &bufferedConn{Conn: conn, r: br}, nil
}

func (c *Client) dialPortErr(ctx context.Context, port int, err error) error {
	if ctx.Err() != nil {
		return ctxError(ctx, nil)
	}
	return fmt.Errorf("port %d: agent did not answer: %v: %w", port, err, errdefs.ErrUnavailable)
}

// bufferedConn reads first what the handshake's reader already took off
// the socket.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite passes a half-close on, so the port sees EOF.
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return b.Conn.Close()
}
