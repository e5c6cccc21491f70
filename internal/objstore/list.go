package objstore

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// maxListBody bounds one ListObjectsV2 response (1000 keys of up to 1 KiB
// each, plus XML).
const maxListBody = 8 << 20

// ListPage is one page of ListObjectsV2.
type ListPage struct {
	Objects []ObjectInfo
	// Next is the continuation token for the next page; "" on the last.
	Next string
}

type listResult struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	IsTruncated           bool     `xml:"IsTruncated"`
	NextContinuationToken string   `xml:"NextContinuationToken"`
	Contents              []struct {
		Key          string `xml:"Key"`
		Size         int64  `xml:"Size"`
		ETag         string `xml:"ETag"`
		LastModified string `xml:"LastModified"`
	} `xml:"Contents"`
}

// parseList reads a ListObjectsV2 response body, which comes from the
// network: keys are kept only if ValidKey, sizes must not be negative, and
// a truncated page must say where to continue.
func parseList(r io.Reader) (ListPage, error) {
	var x listResult
	if err := xml.NewDecoder(io.LimitReader(r, maxListBody)).Decode(&x); err != nil {
		return ListPage{}, fmt.Errorf("s3 ListObjectsV2: malformed response: %v: %w", err, errdefs.ErrUnavailable)
	}
	if x.XMLName.Local != "ListBucketResult" {
		return ListPage{}, fmt.Errorf("s3 ListObjectsV2: unexpected response element %q: %w", truncate(x.XMLName.Local, 40), errdefs.ErrUnavailable)
	}
	var p ListPage
	for _, o := range x.Contents {
		if !ValidKey(o.Key) || o.Size < 0 {
			return ListPage{}, fmt.Errorf("s3 ListObjectsV2: response holds an invalid entry %q: %w", truncate(o.Key, 80), errdefs.ErrUnavailable)
		}
		oi := ObjectInfo{Key: o.Key, Size: o.Size, ETag: strings.Trim(o.ETag, `"`)}
		if t, err := time.Parse(time.RFC3339Nano, o.LastModified); err == nil {
			oi.LastModified = t
		}
		p.Objects = append(p.Objects, oi)
	}
	if x.IsTruncated {
		if x.NextContinuationToken == "" || len(x.NextContinuationToken) > 4096 {
			return ListPage{}, fmt.Errorf("s3 ListObjectsV2: truncated page without a usable continuation token: %w", errdefs.ErrUnavailable)
		}
		p.Next = x.NextContinuationToken
	}
	return p, nil
}

// ListPage lists up to maxKeys (1-1000; 0 = 1000) objects whose keys start
// with prefix, continuing after token ("" = from the start).
func (c *Client) ListPage(ctx context.Context, bucket, prefix, token string, maxKeys int) (ListPage, error) {
	if maxKeys <= 0 || maxKeys > 1000 {
		maxKeys = 1000
	}
	q := url.Values{"list-type": {"2"}, "max-keys": {itoa(maxKeys)}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if token != "" {
		q.Set("continuation-token", token)
	}
	resp, err := c.do(ctx, request{op: "ListObjectsV2", method: http.MethodGet, bucket: bucket, query: q})
	if err != nil {
		return ListPage{}, err
	}
	defer drain(resp)
	p, err := parseList(resp.Body)
	if err != nil {
		return ListPage{}, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	return p, nil
}

// List lists every object under prefix, page by page, up to limit objects
// (0 = no limit).
func (c *Client) List(ctx context.Context, bucket, prefix string, limit int) ([]ObjectInfo, error) {
	var out []ObjectInfo
	token := ""
	for {
		p, err := c.ListPage(ctx, bucket, prefix, token, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Objects...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		if p.Next == "" {
			return out, nil
		}
		if p.Next == token {
			return nil, fmt.Errorf("s3 ListObjectsV2 %s: the server repeated a continuation token: %w", bucket, errdefs.ErrUnavailable)
		}
		token = p.Next
	}
}
