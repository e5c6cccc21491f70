package paddock

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/paddock-dev/paddock/api"
)

// CreateSnapshot takes a consistent snapshot of a running, paused or
// stopped sandbox (a running one is frozen for the copy). A snapshot keeps
// the sandbox's files (its changes against the image, with owners, modes,
// times, extended attributes and deletions). It does not keep memory,
// running processes or mounts: a sandbox restored from one starts fresh on
// those files. Use Pause to keep memory and processes.
func (c *Client) CreateSnapshot(ctx context.Context, id string, req api.CreateSnapshotRequest) (*api.Snapshot, error) {
	p, err := sandboxPath(id, "/snapshots")
	if err != nil {
		return nil, err
	}
	var s api.Snapshot
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Fork snapshots a sandbox now and restores it into req.Count new,
// independent sandboxes.
func (c *Client) Fork(ctx context.Context, id string, req api.ForkRequest) (*api.ForkResult, error) {
	p, err := sandboxPath(id, "/fork")
	if err != nil {
		return nil, err
	}
	var res api.ForkResult
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListSnapshots lists every snapshot, oldest first.
func (c *Client) ListSnapshots(ctx context.Context) ([]api.Snapshot, error) {
	var l api.SnapshotList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/snapshots"}, &l); err != nil {
		return nil, err
	}
	return l.Snapshots, nil
}

func snapshotPath(ref, suffix string) (string, error) {
	e, err := escapeRef("snapshot id", ref)
	if err != nil {
		return "", err
	}
	return "/v1/snapshots/" + e + suffix, nil
}

// GetSnapshot returns one snapshot by id or name.
func (c *Client) GetSnapshot(ctx context.Context, ref string) (*api.Snapshot, error) {
	p, err := snapshotPath(ref, "")
	if err != nil {
		return nil, err
	}
	var s api.Snapshot
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SetSnapshotTTL makes a snapshot expire ttl from now: a Go duration such
// as "72h", or api.SnapshotTTLNever.
func (c *Client) SetSnapshotTTL(ctx context.Context, ref, ttl string) (*api.Snapshot, error) {
	p, err := snapshotPath(ref, "")
	if err != nil {
		return nil, err
	}
	var s api.Snapshot
	if err := c.call(ctx, request{method: http.MethodPatch, path: p, jsonBody: api.UpdateSnapshotRequest{TTL: ttl}}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSnapshot deletes a snapshot. Sandboxes restored from it keep
// working.
func (c *Client) DeleteSnapshot(ctx context.Context, ref string) error {
	p, err := snapshotPath(ref, "")
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// ExportSnapshot streams a snapshot as one file (a tar holding a JSON
// manifest and each layer with its sha256) into w.
func (c *Client) ExportSnapshot(ctx context.Context, ref string, w io.Writer) error {
	p, err := snapshotPath(ref, "/export")
	if err != nil {
		return err
	}
	return c.download(ctx, request{method: http.MethodGet, path: p, accept: "application/x-tar"}, w)
}

// ImportOptions name an imported snapshot and set its time to live.
type ImportOptions struct {
	Name string // "" = the name in the file, if free
	TTL  string // "" = the daemon's default; "never" for none
	// FilesOnly leaves a memory snapshot's memory image out: the
	// snapshot restores as a file snapshot. A memory image is kept only
	// from this daemon or one sharing its memory export key.
	FilesOnly bool
}

// ImportSnapshot uploads an exported snapshot file. A corrupted, truncated
// or tampered file is refused (ErrInvalidArgument, with a checksum message).
func (c *Client) ImportSnapshot(ctx context.Context, r io.Reader, opts ImportOptions) (*api.Snapshot, error) {
	if r == nil {
		return nil, fmt.Errorf("nil reader: %w", ErrInvalidArgument)
	}
	q := url.Values{}
	if opts.Name != "" {
		q.Set("name", opts.Name)
	}
	if opts.TTL != "" {
		q.Set("ttl", opts.TTL)
	}
	if opts.FilesOnly {
		q.Set("files_only", "true")
	}
	var s api.Snapshot
	req := request{method: http.MethodPost, path: "/v1/snapshots/import", query: q, body: r, ctype: "application/x-tar"}
	if err := c.call(ctx, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
