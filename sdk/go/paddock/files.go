package paddock

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/paddock-dev/paddock/api"
)

// FileOption adjusts one file operation.
type FileOption func(*fileOptions)

type fileOptions struct{ user string }

// AsUser runs a file operation as the named user inside the sandbox
// ("user" by default; "root" to reach anywhere). Relative paths are
// resolved against that user's home directory.
func AsUser(name string) FileOption { return func(o *fileOptions) { o.user = name } }

func applyFileOptions(r *request, opts []FileOption) error {
	var o fileOptions
	for _, f := range opts {
		f(&o)
	}
	if o.user == "" {
		return nil
	}
	if len(o.user) > 32 || strings.ContainsAny(o.user, ":/\x00") {
		return fmt.Errorf("user %q is not a valid user name: %w", o.user, ErrInvalidArgument)
	}
	if r.query == nil {
		r.query = url.Values{}
	}
	r.query.Set("user", o.user)
	return nil
}

// checkPath refuses paths the daemon could never accept, before a round trip.
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path is empty: %w", ErrInvalidArgument)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path contains a NUL byte: %w", ErrInvalidArgument)
	case len(p) > 4096:
		return fmt.Errorf("path is too long (%d bytes, at most 4096): %w", len(p), ErrInvalidArgument)
	}
	return nil
}

// fileRequest builds a request on /v1/sandboxes/{id}{suffix}?path=p.
func fileRequest(method, id, suffix, p string, opts []FileOption) (request, error) {
	sp, err := sandboxPath(id, suffix)
	if err != nil {
		return request{}, err
	}
	if err := checkPath(p); err != nil {
		return request{}, err
	}
	r := request{method: method, path: sp, query: url.Values{"path": {p}}}
	return r, applyFileOptions(&r, opts)
}

// ReadFile streams the file at path in the sandbox into w.
func (c *Client) ReadFile(ctx context.Context, id, path string, w io.Writer, opts ...FileOption) error {
	r, err := fileRequest(http.MethodGet, id, "/files", path, opts)
	if err != nil {
		return err
	}
	r.accept = "application/octet-stream"
	return c.download(ctx, r, w)
}

// WriteFile creates or replaces the file at path with r's contents,
// creating missing parent directories. A non-zero mode is sent along for the
// daemon to apply; a zero one leaves the permissions to the daemon.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode, opts ...FileOption) (*api.FileInfo, error) {
	req, err := fileRequest(http.MethodPut, id, "/files", path, opts)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("nil reader: %w", ErrInvalidArgument)
	}
	if perm := mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); perm != 0 {
		req.query.Set("mode", fmt.Sprintf("%04o", unixMode(perm)))
	}
	req.body, req.ctype = r, "application/octet-stream"
	var fi api.FileInfo
	if err := c.call(ctx, req, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// unixMode turns Go's mode bits into the classic octal ones.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// ListDir lists a directory's entries; an empty path lists the user's home.
func (c *Client) ListDir(ctx context.Context, id, path string, opts ...FileOption) ([]api.FileInfo, error) {
	p := path
	if p == "" {
		p = "." // the server resolves relative paths against the user's home
	}
	r, err := fileRequest(http.MethodGet, id, "/files/list", p, opts)
	if err != nil {
		return nil, err
	}
	var list api.FileList
	if err := c.call(ctx, r, &list); err != nil {
		return nil, err
	}
	return list.Entries, nil
}

// Stat describes one path without following a final symlink's target
// (the daemon decides; see api.FileInfo.SymlinkTarget).
func (c *Client) Stat(ctx context.Context, id, path string, opts ...FileOption) (*api.FileInfo, error) {
	r, err := fileRequest(http.MethodGet, id, "/files/stat", path, opts)
	if err != nil {
		return nil, err
	}
	var fi api.FileInfo
	if err := c.call(ctx, r, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// MakeDir creates a directory.
func (c *Client) MakeDir(ctx context.Context, id, path string, opts ...FileOption) (*api.FileInfo, error) {
	sp, err := sandboxPath(id, "/files/mkdir")
	if err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	req := request{method: http.MethodPost, path: sp, jsonBody: api.PathRequest{Path: path}}
	if err := applyFileOptions(&req, opts); err != nil {
		return nil, err
	}
	var fi api.FileInfo
	err = c.call(ctx, req, &fi)
	if err != nil {
		return nil, err
	}
	return &fi, nil
}

// Move renames src to dst inside the sandbox.
func (c *Client) Move(ctx context.Context, id, src, dst string, opts ...FileOption) (*api.FileInfo, error) {
	sp, err := sandboxPath(id, "/files/move")
	if err != nil {
		return nil, err
	}
	if err := checkPath(src); err != nil {
		return nil, err
	}
	if err := checkPath(dst); err != nil {
		return nil, err
	}
	req := request{method: http.MethodPost, path: sp, jsonBody: api.MoveRequest{Source: src, Destination: dst}}
	if err := applyFileOptions(&req, opts); err != nil {
		return nil, err
	}
	var fi api.FileInfo
	err = c.call(ctx, req, &fi)
	if err != nil {
		return nil, err
	}
	return &fi, nil
}

// Remove deletes a file or a directory tree.
func (c *Client) Remove(ctx context.Context, id, path string, opts ...FileOption) error {
	r, err := fileRequest(http.MethodDelete, id, "/files", path, opts)
	if err != nil {
		return err
	}
	return c.call(ctx, r, nil)
}

// TarOut streams the directory dir as a tar archive into w.
func (c *Client) TarOut(ctx context.Context, id, dir string, w io.Writer, opts ...FileOption) error {
	r, err := fileRequest(http.MethodGet, id, "/tar", dir, opts)
	if err != nil {
		return err
	}
	r.accept = "application/x-tar"
	return c.download(ctx, r, w)
}

// TarIn extracts the tar archive read from r under dir in the sandbox.
func (c *Client) TarIn(ctx context.Context, id, dir string, r io.Reader, opts ...FileOption) error {
	req, err := fileRequest(http.MethodPut, id, "/tar", dir, opts)
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("nil reader: %w", ErrInvalidArgument)
	}
	req.body, req.ctype = r, "application/x-tar"
	return c.call(ctx, req, nil)
}

// ExportLayer streams the sandbox's writable layer (its changes against
// the image, deletions as OCI whiteouts) as a tar archive into w.
func (c *Client) ExportLayer(ctx context.Context, id string, w io.Writer) error {
	p, err := sandboxPath(id, "/layer")
	if err != nil {
		return err
	}
	return c.download(ctx, request{method: http.MethodGet, path: p, accept: "application/x-tar"}, w)
}
