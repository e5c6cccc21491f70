package paddock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddock-dev/paddock/api"
)

type idemKeyCtx struct{}

// WithIdempotencyKey returns a context whose mutating calls carry key as
// their Idempotency-Key: the daemon runs such a call once and answers every
// retry with the same key with the first response, also after a daemon
// restart (for 24 hours). Use one fresh key (a UUID) per logical request,
// and the same key for its retries. A key reused for a different request
// gets ErrConflict. Calls that only read ignore it.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idemKeyCtx{}, key)
}

type idemBaseCtx struct{}

// MaxIdempotencyKeyBase is the longest base WithIdempotencyKeyBase takes:
// a derived key adds 17 characters, and a key is at most 255.
const MaxIdempotencyKeyBase = 255 - 17

// WithIdempotencyKeyBase returns a context whose mutating calls each carry
// a key derived from base and the call: base + "." + the first 16 hex
// digits of the SHA-256 of the call's method, path and query. A program
// that makes several different calls with one context (build an image,
// create a sandbox, exec in it) can be retried as a whole with the same
// base: each call runs once and is replayed after, whichever of them the
// first attempt reached, and no two different calls share a key. Two calls
// to the same method, path and query with different bodies would share a
// key (the second gets ErrConflict); give those their own key with
// WithIdempotencyKey, which takes precedence. base is 1 to
// MaxIdempotencyKeyBase visible ASCII characters; the daemon checks the
// derived key. This is what the CLI's --idempotency-key sets.
func WithIdempotencyKeyBase(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, idemBaseCtx{}, base)
}

// idempotencyKey is the key a call carries: the context's own key, else
// one derived from its base, else none.
func idempotencyKey(ctx context.Context, r request) string {
	if k, _ := ctx.Value(idemKeyCtx{}).(string); k != "" {
		return k
	}
	base, _ := ctx.Value(idemBaseCtx{}).(string)
	if base == "" {
		return ""
	}
	h := sha256.Sum256([]byte(r.method + " " + r.path + "?" + r.query.Encode()))
	return base + "." + hex.EncodeToString(h[:8])
}

// pageQuery is a ledger page's query: after and limit when set.
func pageQuery(after int64, limit int) url.Values {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// LedgerPage returns up to limit ledger entries after seq after (0: from
// the start; limit 0: the daemon's page size). Page on with Next.
func (c *Client) LedgerPage(ctx context.Context, id string, after int64, limit int) (*api.Ledger, error) {
	p, err := sandboxPath(id, "/ledger")
	if err != nil {
		return nil, err
	}
	var l api.Ledger
	if err := c.call(ctx, request{method: http.MethodGet, path: p, query: pageQuery(after, limit)}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Ledger returns a sandbox's whole ledger, oldest first. It works after the
// sandbox is destroyed, for the daemon's retention period.
func (c *Client) Ledger(ctx context.Context, id string) (*api.Ledger, error) {
	all, err := c.LedgerPage(ctx, id, 0, 0)
	if err != nil {
		return nil, err
	}
	for all.Next > 0 {
		page, err := c.LedgerPage(ctx, id, all.Next, 0)
		if err != nil {
			return nil, err
		}
		all.Entries = append(all.Entries, page.Entries...)
		all.Next = page.Next
	}
	return all, nil
}

// AddLedgerEntry records a side effect outside the sandbox (a payment, a
// message sent) in its ledger, with source "caller".
func (c *Client) AddLedgerEntry(ctx context.Context, id string, req api.AddLedgerEntryRequest) (*api.LedgerEntry, error) {
	p, err := sandboxPath(id, "/ledger")
	if err != nil {
		return nil, err
	}
	var e api.LedgerEntry
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// CreateBackup archives a directory of a sandbox into the daemon's backup
// store (req.Store "local", the default, or "s3" for the daemon's
// S3-compatible bucket: ErrUnavailable when it has none or cannot reach
// it) and returns the backup's record.
func (c *Client) CreateBackup(ctx context.Context, id string, req api.CreateBackupRequest) (*api.Backup, error) {
	p, err := sandboxPath(id, "/backups")
	if err != nil {
		return nil, err
	}
	var b api.Backup
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// ListBackups lists unexpired backups; sandbox "" lists all of them.
func (c *Client) ListBackups(ctx context.Context, sandbox string) ([]api.Backup, error) {
	q := url.Values{}
	if sandbox != "" {
		q.Set("sandbox", sandbox)
	}
	var l api.BackupList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/backups", query: q}, &l); err != nil {
		return nil, err
	}
	return l.Backups, nil
}

func backupPath(id, suffix string) (string, error) {
	e, err := escapeRef("backup id", id)
	if err != nil {
		return "", err
	}
	return "/v1/backups/" + e + suffix, nil
}

// GetBackup describes one backup.
func (c *Client) GetBackup(ctx context.Context, id string) (*api.Backup, error) {
	p, err := backupPath(id, "")
	if err != nil {
		return nil, err
	}
	var b api.Backup
	if err := c.call(ctx, request{method: http.MethodGet, path: p}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// DeleteBackup deletes a backup and its archive.
func (c *Client) DeleteBackup(ctx context.Context, id string) error {
	p, err := backupPath(id, "")
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: p}, nil)
}

// RestoreBackup extracts a backup into a sandbox (req.Sandbox), under
// req.Path or the backed-up path. The archive's checksum is verified
// before anything is written.
func (c *Client) RestoreBackup(ctx context.Context, id string, req api.RestoreBackupRequest) (*api.Backup, error) {
	p, err := backupPath(id, "/restore")
	if err != nil {
		return nil, err
	}
	var b api.Backup
	if err := c.call(ctx, request{method: http.MethodPost, path: p, jsonBody: req}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}
