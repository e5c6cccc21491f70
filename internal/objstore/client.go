package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Sizes of multipart uploads: a body larger than MultipartThreshold is sent
// in parts of PartSize (S3 needs parts of at least 5 MiB but the last, and
// at most 10000 of them).
const (
	DefaultMultipartThreshold = 64 << 20
	DefaultPartSize           = 16 << 20
	minPartSize               = 5 << 20
	maxParts                  = 10000
	// maxErrorBody bounds how much of an error response is read.
	maxErrorBody = 64 << 10
)

// Options configure a Client.
type Options struct {
	// Endpoint is the service's base URL, "https://s3.example.com". A
	// plain-http endpoint must say "http://" itself (for a server on
	// loopback or a private network); one without a scheme is https.
	Endpoint string
	// Region signs requests; default "us-east-1".
	Region string
	// PathStyle addresses buckets as <endpoint>/<bucket>/<key> instead of
	// <bucket>.<endpoint host>/<key>.
	PathStyle   bool
	Credentials Credentials
	// HTTPClient defaults to a client with sane timeouts.
	HTTPClient *http.Client
	// MaxAttempts bounds tries of one request on 5xx and network errors;
	// default 4.
	MaxAttempts int
	// RetryBase is the first backoff; it doubles each retry (default 200ms).
	RetryBase time.Duration
	// MultipartThreshold and PartSize tune uploads (defaults above).
	MultipartThreshold int64
	PartSize           int64
	Logger             *slog.Logger
	// now is for tests.
	now func() time.Time
}

// Client talks to one S3-compatible endpoint. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	pathStyle bool
	sig       signer
	hc        *http.Client
	attempts  int
	retryBase time.Duration
	threshold int64
	partSize  int64
	log       *slog.Logger
	now       func() time.Time
}

// New checks opts and returns a client; it sends nothing.
func New(opts Options) (*Client, error) {
	ep := strings.TrimSpace(opts.Endpoint)
	if ep == "" {
		return nil, errdefs.Invalid("s3: an endpoint URL is required")
	}
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errdefs.Invalid("s3: endpoint %q: want http(s)://host[:port][/path]", truncate(opts.Endpoint, 200))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if opts.Credentials.AccessKeyID == "" || opts.Credentials.SecretAccessKey == "" {
		return nil, errdefs.Invalid("s3: an access key id and a secret access key are required")
	}
	region := opts.Region
	if region == "" {
		region = "us-east-1"
	}
	if len(region) > 64 || strings.ContainsAny(region, "/ \n") {
		return nil, errdefs.Invalid("s3: region %q is not a region name", truncate(region, 80))
	}
	c := &Client{
		base: u, pathStyle: opts.PathStyle,
		sig:       signer{creds: opts.Credentials, region: region},
		hc:        opts.HTTPClient,
		attempts:  opts.MaxAttempts,
		retryBase: opts.RetryBase,
		threshold: opts.MultipartThreshold,
		partSize:  opts.PartSize,
		log:       opts.Logger,
		now:       opts.now,
	}
	if c.hc == nil {
		c.hc = &http.Client{
			// A redirect is reported, not followed: a signed request is
			// valid for one host only, and the endpoint is what the
			// operator chose to trust.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{
				Proxy:                 nil, // never through a host proxy: the endpoint is what the operator named
				DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
				TLSHandshakeTimeout:   10 * time.Second,
				ResponseHeaderTimeout: 2 * time.Minute,
				MaxIdleConnsPerHost:   8,
				IdleConnTimeout:       90 * time.Second,
			}}
	}
	if c.attempts <= 0 {
		c.attempts = 4
	}
	if c.retryBase <= 0 {
		c.retryBase = 200 * time.Millisecond
	}
	if c.threshold <= 0 {
		c.threshold = DefaultMultipartThreshold
	}
	if c.partSize <= 0 {
		c.partSize = DefaultPartSize
	}
	if c.partSize < minPartSize {
		return nil, errdefs.Invalid("s3: part size %d is below S3's minimum of 5 MiB", c.partSize)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// Endpoint is the endpoint URL (it holds no secret).
func (c *Client) Endpoint() string { return c.base.String() }

// ValidBucket reports whether b is a usable bucket name (3-63 lowercase
// letters, digits, '-', '.', starting and ending with a letter or digit).
func ValidBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		ch := b[i]
		ok := 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ((ch == '-' || ch == '.') && i > 0 && i < len(b)-1)
		if !ok {
			return false
		}
	}
	return true
}

// ValidKey reports whether k is a key this client sends: 1-1024 bytes of
// printable ASCII, no leading '/', no "." or ".." segments (some servers
// map keys to files).
func ValidKey(k string) bool {
	if k == "" || len(k) > 1024 || strings.HasPrefix(k, "/") {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	for _, seg := range strings.Split(k, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// objectURL builds the URL of bucket/key (key "" = the bucket itself).
func (c *Client) objectURL(bucket, key string, q url.Values) *url.URL {
	u := *c.base
	var p string
	if c.pathStyle {
		p = u.Path + "/" + bucket
		if key != "" {
			p += "/" + key
		}
	} else {
		u.Host = bucket + "." + u.Host
		p = u.Path + "/" + key
	}
	u.Path = p
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	u.RawPath = strings.Join(segs, "/")
	if q != nil {
		u.RawQuery = canonicalQuery(q)
	}
	return &u
}

// request describes one call for do.
type request struct {
	op, method   string
	bucket, key  string
	query        url.Values
	header       http.Header
	body         []byte        // hashed and signed; retried
	stream       io.ReadSeeker // sent from its start on each try
	streamSize   int64
	streamSHA256 string // hex, or UnsignedPayload
}

// do sends r, retrying on 5xx and network errors with backoff, and returns
// a response with a 2xx status; any other status is an *Error.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	if !ValidBucket(r.bucket) {
		return nil, errdefs.Invalid("s3: %q is not a valid bucket name", truncate(r.bucket, 80))
	}
	if r.key != "" && !ValidKey(r.key) {
		return nil, errdefs.Invalid("s3: %q is not a valid object key", truncate(r.key, 200))
	}
	var lastErr error
	for attempt := 0; attempt < c.attempts; attempt++ {
		if attempt > 0 {
			d := c.retryBase << (attempt - 1)
			select {
			case <-ctx.Done():
				return nil, c.wrapNet(r, ctx.Err())
			case <-time.After(d):
			}
		}
		resp, err := c.try(ctx, r)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		var se *Error
		if ctx.Err() != nil || (errors.As(err, &se) && se.StatusCode < 500) || errors.Is(err, errdefs.ErrInvalidArgument) {
			return nil, err
		}
		c.log.Debug("s3 request failed; retrying", "op", r.op, "bucket", r.bucket, "key", r.key, "attempt", attempt+1, "err", err)
	}
	return nil, lastErr
}

func (c *Client) try(ctx context.Context, r request) (*http.Response, error) {
	u := c.objectURL(r.bucket, r.key, r.query)
	var body io.Reader
	payload := EmptySHA256
	var size int64
	switch {
	case r.stream != nil:
		if _, err := r.stream.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("s3 %s %s/%s: rewind body: %w", r.op, r.bucket, r.key, err)
		}
		body, size, payload = io.LimitReader(r.stream, r.streamSize), r.streamSize, r.streamSHA256
	case r.body != nil:
		sum := sha256.Sum256(r.body)
		body, size, payload = bytes.NewReader(r.body), int64(len(r.body)), hex.EncodeToString(sum[:])
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("s3 %s %s/%s: %w", r.op, r.bucket, r.key, err)
	}
	req.URL = u
	req.ContentLength = size
	if body == nil {
		req.Body = nil
	} else if size == 0 {
		req.Body = http.NoBody
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	c.sig.sign(req, payload, c.now())
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.wrapNet(r, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, parseError(r, resp)
}

func (c *Client) wrapNet(r request, err error) error {
	// url.Error carries the URL, which holds no secret; the text of err
	// is kept for the operator, and the sentinel says "try later".
	return fmt.Errorf("s3 %s %s/%s at %s: %v: %w", r.op, r.bucket, r.key, c.base.Host, unwrapURLErr(err), errdefs.ErrUnavailable)
}

func unwrapURLErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// CreateBucket makes a bucket; one that exists and is ours is not an error.
func (c *Client) CreateBucket(ctx context.Context, bucket string) error {
	resp, err := c.do(ctx, request{op: "CreateBucket", method: http.MethodPut, bucket: bucket})
	if err != nil {
		var se *Error
		if errors.As(err, &se) && se.Code == "BucketAlreadyOwnedByYou" {
			return nil
		}
		return err
	}
	drain(resp)
	return nil
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
}

// Head describes an object; a missing one is ErrNotFound.
func (c *Client) Head(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	resp, err := c.do(ctx, request{op: "HeadObject", method: http.MethodHead, bucket: bucket, key: key})
	if err != nil {
		return ObjectInfo{}, err
	}
	drain(resp)
	oi := ObjectInfo{Key: key, Size: resp.ContentLength, ETag: strings.Trim(resp.Header.Get("ETag"), `"`)}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		oi.LastModified = t
	}
	return oi, nil
}

// Get streams an object's bytes; the caller closes the body. A missing
// object is ErrNotFound.
func (c *Client) Get(ctx context.Context, bucket, key string) (io.ReadCloser, ObjectInfo, error) {
	resp, err := c.do(ctx, request{op: "GetObject", method: http.MethodGet, bucket: bucket, key: key})
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	oi := ObjectInfo{Key: key, Size: resp.ContentLength, ETag: strings.Trim(resp.Header.Get("ETag"), `"`)}
	return resp.Body, oi, nil
}

// Delete removes an object; deleting a missing object is not an error (S3
// itself answers 204 either way).
func (c *Client) Delete(ctx context.Context, bucket, key string) error {
	resp, err := c.do(ctx, request{op: "DeleteObject", method: http.MethodDelete, bucket: bucket, key: key})
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) && !isBucketMissing(err) {
			return nil
		}
		return err
	}
	drain(resp)
	return nil
}

// Put stores size bytes of r as bucket/key. Bodies up to the multipart
// threshold go in one signed PUT (r is read twice: to hash, then to send);
// larger ones as a multipart upload, aborted on any failure so no parts
// are left behind.
func (c *Client) Put(ctx context.Context, bucket, key string, r io.ReadSeeker, size int64) error {
	if size < 0 {
		return errdefs.Invalid("s3: negative size")
	}
	if size > c.threshold {
		return c.putMultipart(ctx, bucket, key, r, size)
	}
	if c.base.Scheme == "https" {
		// TLS protects the body in transit, so it is streamed once
		// instead of read twice to hash it first.
		resp, err := c.do(ctx, request{
			op: "PutObject", method: http.MethodPut, bucket: bucket, key: key,
			header: http.Header{"Content-Type": {"application/octet-stream"}},
			stream: r, streamSize: size, streamSHA256: UnsignedPayload,
		})
		if err != nil {
			return err
		}
		drain(resp)
		return nil
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("s3 PutObject %s/%s: %w", bucket, key, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, size))
	if err != nil {
		return fmt.Errorf("s3 PutObject %s/%s: read body: %w", bucket, key, err)
	}
	if n != size {
		return fmt.Errorf("s3 PutObject %s/%s: body is %d bytes, not %d", bucket, key, n, size)
	}
	resp, err := c.do(ctx, request{
		op: "PutObject", method: http.MethodPut, bucket: bucket, key: key,
		header: http.Header{"Content-Type": {"application/octet-stream"}},
		stream: r, streamSize: size, streamSHA256: hex.EncodeToString(h.Sum(nil)),
	})
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// itoa is strconv.Itoa, named for the query builders.
func itoa(n int) string { return strconv.Itoa(n) }
