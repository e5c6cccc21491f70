package objstore

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// partsInFlight bounds the parts of one upload being sent at once (and so
// its memory: this many part buffers).
const partsInFlight = 3

type initiateResult struct {
	UploadID string `xml:"UploadId"`
}

type completePart struct {
	PartNumber int    `xml:"PartNumber"`
	ETag       string `xml:"ETag"`
}

type completeUpload struct {
	XMLName xml.Name       `xml:"CompleteMultipartUpload"`
	Parts   []completePart `xml:"Part"`
}

// completeResult may be an error even under HTTP 200: S3 reports a failed
// completion in the body of a 200 response.
type completeResult struct {
	XMLName xml.Name
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// putMultipart uploads r in parts. Each part is read into memory (one
// part's worth), hashed, and sent signed, so retries resend exact bytes.
func (c *Client) putMultipart(ctx context.Context, bucket, key string, r io.ReadSeeker, size int64) (err error) {
	part := c.partSize
	for size/part >= maxParts {
		part *= 2
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("s3 PutObject %s/%s: %w", bucket, key, err)
	}
	uploadID, err := c.CreateMultipartUpload(ctx, bucket, key)
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		// Abort outlives the caller's context: parts left behind are
		// billed and invisible to listings.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if aerr := c.AbortMultipartUpload(actx, bucket, key, uploadID); aerr != nil {
			c.log.Warn("s3 abort multipart upload", "bucket", bucket, "key", key, "err", aerr)
		}
	}()
	// Parts are read in order and sent by up to partsInFlight senders,
	// each with its own buffer: a bounded memory cost for overlapping
	// the reading, hashing and sending of consecutive parts.
	n := int((size + part - 1) / part)
	parts := make([]completePart, n)
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan []byte, partsInFlight)
	for range partsInFlight {
		free <- nil
	}
	errc := make(chan error, n)
	var wg sync.WaitGroup
	var readErr error
	for i, off := 0, int64(0); i < n; i++ {
		var buf []byte
		select {
		case buf = <-free:
		case <-uctx.Done():
		}
		if uctx.Err() != nil {
			break
		}
		if buf == nil {
			buf = make([]byte, part)
		}
		want := min(part, size-off)
		if _, err := io.ReadFull(r, buf[:want]); err != nil {
			readErr = fmt.Errorf("s3 UploadPart %s/%s: read body at %d: %w", bucket, key, off, err)
			break
		}
		off += want
		wg.Add(1)
		go func(i int, data []byte) {
			defer wg.Done()
			etag, err := c.UploadPart(uctx, bucket, key, uploadID, i+1, data)
			if err != nil {
				errc <- err
				cancel()
				return
			}
			parts[i] = completePart{PartNumber: i + 1, ETag: etag}
			free <- data[:cap(data)]
		}(i, buf[:want])
	}
	wg.Wait()
	close(errc)
	if readErr != nil {
		return readErr
	}
	if err := <-errc; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3 PutObject %s/%s: %w", bucket, key, err)
	}
	return c.CompleteMultipartUpload(ctx, bucket, key, uploadID, parts)
}

// CreateMultipartUpload starts a multipart upload and returns its id.
func (c *Client) CreateMultipartUpload(ctx context.Context, bucket, key string) (string, error) {
	resp, err := c.do(ctx, request{op: "CreateMultipartUpload", method: http.MethodPost, bucket: bucket, key: key,
		query: url.Values{"uploads": {""}}, header: http.Header{"Content-Type": {"application/octet-stream"}}})
	if err != nil {
		return "", err
	}
	defer drain(resp)
	var x initiateResult
	if err := xml.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&x); err != nil || x.UploadID == "" {
		return "", fmt.Errorf("s3 CreateMultipartUpload %s/%s: the response has no upload id: %w", bucket, key, errdefs.ErrUnavailable)
	}
	return x.UploadID, nil
}

// UploadPart sends one part (1-10000) and returns its ETag.
func (c *Client) UploadPart(ctx context.Context, bucket, key, uploadID string, n int, data []byte) (string, error) {
	resp, err := c.do(ctx, request{op: "UploadPart", method: http.MethodPut, bucket: bucket, key: key,
		query: url.Values{"partNumber": {itoa(n)}, "uploadId": {uploadID}}, body: data})
	if err != nil {
		return "", err
	}
	drain(resp)
	etag := resp.Header.Get("ETag")
	if etag == "" {
		return "", fmt.Errorf("s3 UploadPart %s/%s: part %d has no ETag: %w", bucket, key, n, errdefs.ErrUnavailable)
	}
	return etag, nil
}

// CompleteMultipartUpload joins the parts into the object.
func (c *Client) CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []completePart) error {
	body, err := xml.Marshal(completeUpload{Parts: parts})
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, request{op: "CompleteMultipartUpload", method: http.MethodPost, bucket: bucket, key: key,
		query: url.Values{"uploadId": {uploadID}}, body: body,
		header: http.Header{"Content-Type": {"application/xml"}}})
	if err != nil {
		return err
	}
	defer drain(resp)
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var x completeResult
	if xml.Unmarshal(bytes.TrimSpace(b), &x) == nil && x.XMLName.Local == "Error" {
		return &Error{Op: "CompleteMultipartUpload", Bucket: bucket, Key: key, StatusCode: http.StatusInternalServerError,
			Code: truncate(x.Code, 100), Message: truncate(x.Message, 500)}
	}
	return nil
}

// AbortMultipartUpload discards an upload's parts. An upload already gone
// is not an error.
func (c *Client) AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error {
	resp, err := c.do(ctx, request{op: "AbortMultipartUpload", method: http.MethodDelete, bucket: bucket, key: key,
		query: url.Values{"uploadId": {uploadID}}})
	if err != nil {
		var se *Error
		if errors.As(err, &se) && strings.EqualFold(se.Code, "NoSuchUpload") {
			return nil
		}
		return err
	}
	drain(resp)
	return nil
}
