// Package client is the daemon's side of the agent protocol: it reaches a
// sandbox's agent over h2c on the agent's unix socket, without ever
// following a symlink the sandbox may have planted at the socket's path,
// and maps the agent's errors to Paddock's error vocabulary.
package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/agent/tree"
	"github.com/paddock-dev/paddock/internal/agent/wire"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errconnect"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
	"github.com/paddock-dev/paddock/proto/gen/filesystem/filesystemconnect"
	"github.com/paddock-dev/paddock/proto/gen/process/processconnect"
)

// baseURL is a placeholder authority: every connection goes to the socket.
const baseURL = "http://agent"

// Client talks to one agent. It is safe for concurrent use; connections
// are made lazily and reused.
type Client struct {
	socketPath string
	// tcpAddr and token are set for an agent reached over a network
	// (NewTCP); socketPath is then empty.
	tcpAddr string
	token   string

	once    sync.Once
	tr      *http.Transport
	rt      http.RoundTripper // tr, with the token added when there is one
	hc      *http.Client
	process processconnect.ProcessClient
	fs      filesystemconnect.FilesystemClient
}

// New returns a client for the agent listening at socketPath (a host path).
func New(socketPath string) *Client {
	return &Client{socketPath: socketPath}
}

// NewTCP returns a client for an agent listening at addr (host:port) on a
// network, which every request proves itself to with token.
func NewTCP(addr, token string) *Client {
	return &Client{tcpAddr: addr, token: token}
}

func (c *Client) init() {
	c.once.Do(func() {
		var protos http.Protocols
		protos.SetUnencryptedHTTP2(true)
		// Idle connections are kept for the sandbox's life: one that sat
		// idle (a warm pool's, say) must not pay a new dial on its next
		// request. The HTTP/2 pings below still find a dead connection.
		c.tr = &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return c.dial(ctx) },
			Protocols:           &protos,
			MaxIdleConns:        4,
			IdleConnTimeout:     0, // see above
			DisableCompression:  true,
			TLSHandshakeTimeout: 0,
		}
		c.tr.HTTP2 = &http.HTTP2Config{
			// Lets the daemon notice a frozen or vanished sandbox on a
			// long-lived stream.
			PingTimeout:     15 * time.Second,
			SendPingTimeout: 30 * time.Second,
		}
		c.rt = c.tr
		if c.token != "" {
			c.rt = tokenTransport{token: c.token, next: c.tr}
		}
		c.hc = &http.Client{Transport: c.rt}
		c.process = processconnect.NewProcessClient(c.hc, baseURL, connect.WithReadMaxBytes(maxAgentMessage))
		c.fs = filesystemconnect.NewFilesystemClient(c.hc, baseURL, connect.WithReadMaxBytes(maxAgentMessage))
	})
}

// dial opens the socket path with O_PATH|O_NOFOLLOW, checks that it is a
// socket, and connects through /proc/self/fd, so a symlink (or anything
// else) swapped in by the sandbox is refused rather than followed.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	if c.tcpAddr != "" {
		d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", c.tcpAddr)
		if err != nil {
			return nil, fmt.Errorf("connect to agent at %s: %v: %w", c.tcpAddr, errnoOf(err), errdefs.ErrUnavailable)
		}
		return conn, nil
	}
	fd, err := unix.Open(c.socketPath, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("agent socket is a symlink; refusing it: %w", errdefs.ErrUnavailable)
		}
		return nil, fmt.Errorf("agent socket: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("agent socket: %v: %w", err, errdefs.ErrUnavailable)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("agent socket path is not a socket; refusing it: %w", errdefs.ErrUnavailable)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("connect to agent: %v: %w", errnoOf(err), errdefs.ErrUnavailable)
	}
	return conn, nil
}

// tokenTransport adds the agent's token to every request.
type tokenTransport struct {
	token string
	next  http.RoundTripper
}

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(wire.TokenHeader, t.token)
	return t.next.RoundTrip(r)
}

func errnoOf(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// Close drops idle connections. Streams in flight end with their contexts.
func (c *Client) Close() error {
	c.init()
	c.tr.CloseIdleConnections()
	return nil
}

// Process is the raw envd process service. Select a user with SetUser.
func (c *Client) Process() processconnect.ProcessClient {
	c.init()
	return c.process
}

// Filesystem is the raw envd filesystem service. Select a user with SetUser.
func (c *Client) Filesystem() filesystemconnect.FilesystemClient {
	c.init()
	return c.fs
}

// SetUser selects the user a request runs as, envd style. "" keeps the
// agent's default user.
func SetUser(h http.Header, user string) {
	if user != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
}

// WaitReady polls /health until the agent answers or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	c.init()
	// The agent answers some milliseconds after its container starts:
	// poll often at first, then back off.
	delay := 2 * time.Millisecond
	var last error
	for {
		last = c.health(ctx)
		if last == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctxError(ctx, fmt.Errorf("agent not ready: %w", last))
		case <-t.C:
		}
		delay = min(delay*3/2, 100*time.Millisecond)
	}
}

func (c *Client) health(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, baseURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent health answered %d: %w", resp.StatusCode, errdefs.ErrUnavailable)
	}
	return nil
}

// ctxError wraps a context's end in the vocabulary: a deadline becomes
// ErrDeadlineExceeded, a cancellation stays context.Canceled.
func ctxError(ctx context.Context, cause error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if cause == nil {
			return fmt.Errorf("%w: %w", errdefs.ErrDeadlineExceeded, ctx.Err())
		}
		return fmt.Errorf("%w: %w (%v)", errdefs.ErrDeadlineExceeded, ctx.Err(), cause)
	}
	return ctx.Err()
}

// rpcErr maps a Connect error from the agent to the vocabulary.
func rpcErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctxError(ctx, nil)
	}
	var sentinel error
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
		sentinel = errconnect.Sentinel(ce.Code())
		if errors.Is(sentinel, context.Canceled) {
			return fmt.Errorf("%s: %w", op, context.Canceled)
		}
	}
	if sentinel == nil && errors.Is(err, errdefs.ErrUnavailable) {
		sentinel = errdefs.ErrUnavailable
	}
	if sentinel == nil {
		return fmt.Errorf("%s: %s", op, msg)
	}
	return fmt.Errorf("%s: %s: %w", op, msg, sentinel)
}

// httpErr maps an HTTP error answer (envd's {message, code}) to the
// vocabulary.
func httpErr(op string, resp *http.Response) error {
	var body struct {
		Message string `json:"message"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	msg := body.Message
	if msg == "" {
		msg = resp.Status
	}
	var sentinel error
	switch resp.StatusCode {
	case http.StatusNotFound:
		sentinel = errdefs.ErrNotFound
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		sentinel = errdefs.ErrInvalidArgument
	case http.StatusUnauthorized:
		sentinel = errdefs.ErrInvalidArgument
	case http.StatusForbidden:
		sentinel = errdefs.ErrPermissionDenied
	case http.StatusConflict:
		sentinel = errdefs.ErrConflict
	case http.StatusRequestEntityTooLarge, http.StatusInsufficientStorage:
		sentinel = errdefs.ErrResourceExhausted
	case http.StatusPreconditionFailed:
		sentinel = errdefs.ErrFailedPrecondition
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		sentinel = errdefs.ErrUnavailable
	default:
		return fmt.Errorf("%s: %s", op, msg)
	}
	return fmt.Errorf("%s: %s: %w", op, msg, sentinel)
}

// do sends an HTTP request to the agent as user.
func (c *Client) do(ctx context.Context, method, path, user string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	c.init()
	if user != "" {
		q.Set("username", user)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path+"?"+q.Encode(), body)
	if err != nil {
		return nil, errdefs.Invalid("build request: %v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	SetUser(req.Header, user)
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx, nil)
		}
		if errors.Is(err, errdefs.ErrUnavailable) {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		return nil, fmt.Errorf("%s %s: %v: %w", method, path, err, errdefs.ErrUnavailable)
	}
	return resp, nil
}

// Stat describes path (a final symlink is described, not followed).
func (c *Client) Stat(ctx context.Context, path, user string) (*filesystem.EntryInfo, error) {
	req := connect.NewRequest(&filesystem.StatRequest{Path: path})
	SetUser(req.Header(), user)
	resp, err := c.Filesystem().Stat(ctx, req)
	if err != nil {
		return nil, rpcErr(ctx, "stat", err)
	}
	return resp.Msg.GetEntry(), nil
}

// ListDir lists one directory level.
func (c *Client) ListDir(ctx context.Context, path, user string) ([]*filesystem.EntryInfo, error) {
	req := connect.NewRequest(&filesystem.ListDirRequest{Path: path, Depth: 1})
	SetUser(req.Header(), user)
	resp, err := c.Filesystem().ListDir(ctx, req)
	if err != nil {
		return nil, rpcErr(ctx, "list", err)
	}
	return resp.Msg.GetEntries(), nil
}

// MakeDir creates path and its parents; ErrConflict if it exists.
func (c *Client) MakeDir(ctx context.Context, path, user string) (*filesystem.EntryInfo, error) {
	req := connect.NewRequest(&filesystem.MakeDirRequest{Path: path})
	SetUser(req.Header(), user)
	resp, err := c.Filesystem().MakeDir(ctx, req)
	if err != nil {
		return nil, rpcErr(ctx, "mkdir", err)
	}
	return resp.Msg.GetEntry(), nil
}

// Move renames src to dst.
func (c *Client) Move(ctx context.Context, src, dst, user string) (*filesystem.EntryInfo, error) {
	req := connect.NewRequest(&filesystem.MoveRequest{Source: src, Destination: dst})
	SetUser(req.Header(), user)
	resp, err := c.Filesystem().Move(ctx, req)
	if err != nil {
		return nil, rpcErr(ctx, "move", err)
	}
	return resp.Msg.GetEntry(), nil
}

// Remove deletes path and everything under it.
func (c *Client) Remove(ctx context.Context, path, user string) error {
	req := connect.NewRequest(&filesystem.RemoveRequest{Path: path})
	SetUser(req.Header(), user)
	if _, err := c.Filesystem().Remove(ctx, req); err != nil {
		return rpcErr(ctx, "remove", err)
	}
	return nil
}

// ReadFile streams the file at path into w.
func (c *Client) ReadFile(ctx context.Context, path, user string, w io.Writer) error {
	return c.download(ctx, "/files", "read "+path, "read "+path, path, user, w)
}

// download GETs route with ?path= and streams the body into w. A broken
// stream is an error, never a short copy.
func (c *Client) download(ctx context.Context, route, op, brokenOp, path, user string, w io.Writer) error {
	return c.downloadQuery(ctx, route, op, brokenOp, url.Values{"path": {path}}, user, w)
}

func (c *Client) downloadQuery(ctx context.Context, route, op, brokenOp string, q url.Values, user string, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, route, user, q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpErr(op, resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctxError(ctx, nil)
		}
		return fmt.Errorf("%s: %v: %w", brokenOp, err, errdefs.ErrUnavailable)
	}
	return nil
}

// WriteFile replaces the file at path with r's content, creating parents.
func (c *Client) WriteFile(ctx context.Context, path, user string, r io.Reader) error {
	return c.WriteFileMode(ctx, path, user, 0, r)
}

// WriteFileMode is WriteFile that also sets the file's permission bits
// (0 keeps the default 0644 of a new file).
func (c *Client) WriteFileMode(ctx context.Context, path, user string, mode os.FileMode, r io.Reader) error {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	resp, err := c.do(ctx, http.MethodPost, "/files", user, q, r, "application/octet-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpErr("write "+path, resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// TarOut streams the directory dir as a tar archive into w. A broken
// stream is an error, never a short archive.
func (c *Client) TarOut(ctx context.Context, dir, user string, w io.Writer) error {
	return c.download(ctx, "/paddock/v1/tar", "tar "+dir, "tar "+dir+": stream broken", dir, user, w)
}

// TarOutOneFS is TarOut of what is on dir's own filesystem: an entry on
// another (a mount point) comes as its name alone, marked with the PAX
// record wire.MountPointRecord, and nothing under it is read. A regular
// file whose inode last changed before unchangedBefore (nanoseconds since
// 1970, by the sandbox's clock; 0: none) comes without its content, marked
// wire.UnchangedRecord.
func (c *Client) TarOutOneFS(ctx context.Context, dir, user string, unchangedBefore int64, w io.Writer) error {
	q := url.Values{"path": {dir}, "one_file_system": {"true"}}
	if unchangedBefore > 0 {
		q.Set("unchanged_before", strconv.FormatInt(unchangedBefore, 10))
	}
	return c.downloadQuery(ctx, "/paddock/v1/tar", "tar "+dir, "tar "+dir+": stream broken", q, user, w)
}

// ErrNoTree is an agent without the tree route (one from before it).
var ErrNoTree = errors.New("the agent has no tree route")

// TreeOut streams the directory dir as a tree stream (package tree) into
// w, files changed before before (nanoseconds since 1970) without their
// content, and returns the agent's clock when it began the walk. A broken
// stream is an error, never a short tree.
func (c *Client) TreeOut(ctx context.Context, dir, user string, before int64, w io.Writer) (walkStart int64, err error) {
	q := url.Values{"path": {dir}, "unchanged_before": {strconv.FormatInt(before, 10)}}
	resp, err := c.do(ctx, http.MethodGet, tree.Path, user, q, nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		return 0, ErrNoTree // the mux's own 404: no such route
	}
	if resp.StatusCode != http.StatusOK {
		return 0, httpErr("read "+dir, resp)
	}
	walkStart, err = strconv.ParseInt(resp.Header.Get(tree.WalkStartHeader), 10, 64)
	if err != nil || walkStart <= 0 {
		return 0, fmt.Errorf("read %s: the agent gave no walk time: %w", dir, errdefs.ErrUnavailable)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return 0, ctxError(ctx, nil)
		}
		return 0, fmt.Errorf("read %s: stream broken: %v: %w", dir, err, errdefs.ErrUnavailable)
	}
	return walkStart, nil
}

// TarIn extracts the tar stream r under dir.
func (c *Client) TarIn(ctx context.Context, dir, user string, r io.Reader) error {
	resp, err := c.do(ctx, http.MethodPut, "/paddock/v1/tar", user, url.Values{"path": {dir}}, r, "application/x-tar")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return httpErr("untar into "+dir, resp)
	}
	return nil
}
