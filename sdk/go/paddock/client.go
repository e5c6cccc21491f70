// Package paddock is the Go client of the Paddock daemon's REST API. The
// zero Client talks to the local daemon over its unix socket; set URL (or
// $PADDOCK_URL) and APIKey to reach a daemon over TCP.
//
// Every error that comes from the daemon is an *APIError, and every error
// the client makes itself wraps one of the exported sentinels, so callers
// test errors with errors.Is(err, paddock.ErrNotFound).
package paddock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultSocket is where the daemon listens when nothing else is said.
const DefaultSocket = "/run/paddock/paddock.sock"

// Environment variables the zero Client reads.
const (
	EnvSocket = "PADDOCK_SOCKET"
	EnvURL    = "PADDOCK_URL"
	EnvAPIKey = "PADDOCK_API_KEY"
)

// maxErrorBody bounds how much of an error response is read: the message
// is for people, and a misbehaving peer must not make us buffer megabytes.
const maxErrorBody = 64 << 10

// maxJSONBody bounds a JSON (non-streamed) response body.
const maxJSONBody = 32 << 20

// socketHost is the placeholder host of requests sent over the unix socket;
// the transport ignores it and dials the socket.
const socketHost = "paddock"

// Client talks to one Paddock daemon. The zero value is ready to use and
// talks to the default socket. A Client is safe for concurrent use; do not
// change its fields while requests are in flight.
type Client struct {
	// Socket is the daemon's unix socket; default $PADDOCK_SOCKET, else
	// /run/paddock/paddock.sock.
	Socket string
	// URL, when set (or $PADDOCK_URL), talks TCP to http(s)://host:port
	// instead of the socket.
	URL string
	// APIKey is sent as "Authorization: Bearer <key>" (default $PADDOCK_API_KEY).
	APIKey string
	// HTTPClient, when set, is used as is (its Transport decides where
	// requests go); it must not have a Timeout shorter than the longest
	// exec, since streams are bounded by their context instead.
	HTTPClient *http.Client
}

// endpoint is where requests go, resolved from the fields and environment.
type endpoint struct {
	base   string // scheme://host[/prefix], no trailing slash
	socket string // unix socket path, or "" for TCP
}

// resolve applies the precedence: explicit fields beat the environment, and
// a URL beats a socket at the same level.
func (c *Client) resolve() (endpoint, error) {
	switch {
	case c.URL != "":
		return urlEndpoint(c.URL)
	case c.Socket != "":
		return endpoint{base: "http://" + socketHost, socket: c.Socket}, nil
	}
	if u := os.Getenv(EnvURL); u != "" {
		return urlEndpoint(u)
	}
	if s := os.Getenv(EnvSocket); s != "" {
		return endpoint{base: "http://" + socketHost, socket: s}, nil
	}
	return endpoint{base: "http://" + socketHost, socket: DefaultSocket}, nil
}

func urlEndpoint(raw string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return endpoint{}, fmt.Errorf("daemon URL %q: want http://host:port or https://host:port: %w", raw, ErrInvalidArgument)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return endpoint{}, fmt.Errorf("daemon URL %q: must not carry credentials, a query or a fragment (use the API key): %w", raw, ErrInvalidArgument)
	}
	return endpoint{base: u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")}, nil
}

func (c *Client) apiKey() string {
	if c.APIKey != "" {
		return c.APIKey
	}
	return os.Getenv(EnvAPIKey)
}

// Transports are shared between Clients so that connections are reused even
// when callers make a fresh zero Client per call.
var (
	transportsMu sync.Mutex
	transports   = map[string]*http.Client{}
)

func (c *Client) httpClient(ep endpoint) *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	transportsMu.Lock()
	defer transportsMu.Unlock()
	key := "unix:" + ep.socket
	if ep.socket == "" {
		key = "tcp"
	}
	if hc, ok := transports[key]; ok {
		return hc
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if ep.socket != "" {
		sock := ep.socket
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				return nil, &dialError{where: "unix socket " + sock, err: err}
			}
			return conn, nil
		}
	} else {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &dialError{where: addr, err: err}
			}
			return conn, nil
		}
	}
	hc := &http.Client{Transport: tr}
	transports[key] = hc
	return hc
}

// dialError marks a failure to reach the daemon at all, as opposed to a
// failure in the middle of a request, so the message can say what to do.
type dialError struct {
	where string
	err   error
}

func (e *dialError) Error() string { return "dial " + e.where + ": " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// request describes one API call.
type request struct {
	method string
	path   string // already escaped, starting with /v1/
	query  url.Values
	body   io.Reader // raw body; nil when jsonBody is used or there is none
	ctype  string
	// jsonBody, when non-nil, is marshalled as the body.
	jsonBody any
	accept   string
}

// send performs the request and returns the response when its status is
// 2xx; any other status becomes an *APIError. The caller closes the body.
// Retrying a 503 that says when to come back (the daemon is starting, or
// holds too many request bodies): only requests whose body can be sent
// again, and for at most maxRetryWait in all.
const (
	maxRetryWait  = 30 * time.Second
	maxRetryAfter = 5 * time.Second
)

func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	deadline := time.Now().Add(maxRetryWait)
	for {
		resp, err := c.sendOnce(ctx, r)
		wait, ok := retryAfter(err)
		if !ok || r.body != nil || time.Now().Add(wait).After(deadline) {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// retryAfter reports how long to wait before sending again after err.
func retryAfter(err error) (time.Duration, bool) {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.retryAfter <= 0 {
		return 0, false
	}
	return min(ae.retryAfter, maxRetryAfter), true
}

func (c *Client) sendOnce(ctx context.Context, r request) (*http.Response, error) {
	if ctx == nil {
		return nil, fmt.Errorf("nil context: %w", ErrInvalidArgument)
	}
	ep, err := c.resolve()
	if err != nil {
		return nil, err
	}
	u := ep.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	body, ctype := r.body, r.ctype
	if r.jsonBody != nil {
		b, err := json.Marshal(r.jsonBody)
		if err != nil {
			return nil, fmt.Errorf("encode request: %v: %w", err, ErrInvalidArgument)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %v: %w", err, ErrInvalidArgument)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "paddock-go-sdk")
	if k := idempotencyKey(ctx, r); k != "" && r.method != http.MethodGet {
		req.Header.Set("Idempotency-Key", k)
	}
	if key := c.apiKey(); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.httpClient(ep).Do(req)
	if err != nil {
		return nil, transportError(ctx, ep, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// transportError turns a failed round trip into an error that says what
// happened in words a user can act on.
func transportError(ctx context.Context, ep endpoint, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var de *dialError
	if errors.As(err, &de) {
		cause := de.err
		// "connect: no such file or directory" says it; the address is
		// already in the message.
		var se *os.SyscallError
		if errors.As(cause, &se) {
			cause = se
		}
		if ep.socket != "" {
			return fmt.Errorf("cannot reach the Paddock daemon at %s (%v): is it running? Start it with `make run` or `paddock serve`: %w",
				ep.socket, cause, ErrUnavailable)
		}
		return fmt.Errorf("cannot reach the Paddock daemon at %s (%v): is it running and listening on TCP? Start it with `make run` or `paddock serve`: %w",
			ep.base, cause, ErrUnavailable)
	}
	return fmt.Errorf("request to the Paddock daemon failed: %v: %w", err, ErrUnavailable)
}

// call sends a request and decodes a JSON response into out (when non-nil).
func (c *Client) call(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBody))
	if err := dec.Decode(out); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("daemon sent an unreadable response to %s %s: %v: %w", r.method, r.path, err, ErrUnavailable)
	}
	return nil
}

// download streams a response body into w.
func (c *Client) download(ctx context.Context, r request, w io.Writer) error {
	_, err := c.downloadHeader(ctx, r, w)
	return err
}

// downloadHeader is download that also returns the answer's header.
func (c *Client) downloadHeader(ctx context.Context, r request, w io.Writer) (http.Header, error) {
	if w == nil {
		return nil, fmt.Errorf("nil writer: %w", ErrInvalidArgument)
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ew := &errWriter{w: w}
	if _, err := io.Copy(ew, resp.Body); err != nil {
		if ew.err != nil {
			// The caller's writer failed: its error, not the daemon's.
			return nil, ew.err
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("download %s: %v: %w", r.path, err, ErrUnavailable)
	}
	return resp.Header, nil
}

// errWriter remembers its writer's error, to tell it from a read error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// escapeRef validates a sandbox id or name (or any other path element the
// caller supplies) and escapes it for use as one URL path segment.
func escapeRef(what, s string) (string, error) {
	switch {
	case s == "":
		return "", fmt.Errorf("%s is empty: %w", what, ErrInvalidArgument)
	case s == "." || s == "..":
		return "", fmt.Errorf("%s %q is not valid: %w", what, s, ErrInvalidArgument)
	case len(s) > 256:
		return "", fmt.Errorf("%s is too long (%d bytes, at most 256): %w", what, len(s), ErrInvalidArgument)
	}
	return url.PathEscape(s), nil
}

// sandboxPath returns /v1/sandboxes/{id}{suffix} with id escaped.
func sandboxPath(id, suffix string) (string, error) {
	e, err := escapeRef("sandbox id", id)
	if err != nil {
		return "", err
	}
	return "/v1/sandboxes/" + e + suffix, nil
}
