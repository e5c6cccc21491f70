package objstore

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Error is an S3 error response. Its text names the operation, bucket,
// key, the S3 error code and message, and never a credential.
type Error struct {
	Op         string
	Bucket     string
	Key        string
	StatusCode int
	Code       string // "NoSuchKey", "SignatureDoesNotMatch", ...
	Message    string
	RequestID  string
}

func (e *Error) Error() string {
	obj := e.Bucket
	if e.Key != "" {
		obj += "/" + e.Key
	}
	msg := fmt.Sprintf("s3 %s %s: %s (HTTP %d)", e.Op, obj, e.Code, e.StatusCode)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Code {
	case "SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied":
		msg += "; check the access key, secret and region the daemon was given"
	}
	return msg
}

// Unwrap maps the response onto the errdefs vocabulary.
func (e *Error) Unwrap() error {
	switch {
	case e.StatusCode == http.StatusNotFound:
		return errdefs.ErrNotFound
	case e.StatusCode == http.StatusForbidden, e.StatusCode == http.StatusUnauthorized:
		return errdefs.ErrPermissionDenied
	case e.StatusCode == http.StatusConflict:
		return errdefs.ErrConflict
	case e.StatusCode == http.StatusPreconditionFailed:
		return errdefs.ErrFailedPrecondition
	case e.StatusCode == http.StatusTooManyRequests, e.StatusCode >= 500:
		return errdefs.ErrUnavailable
	case e.StatusCode == http.StatusBadRequest && e.Code == "EntityTooLarge":
		return errdefs.ErrResourceExhausted
	default:
		return errdefs.ErrFailedPrecondition
	}
}

type xmlError struct {
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
	RequestID string `xml:"RequestId"`
}

func parseError(r request, resp *http.Response) error {
	e := &Error{Op: r.op, Bucket: r.bucket, Key: r.key, StatusCode: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var x xmlError
	if len(b) > 0 && xml.Unmarshal(b, &x) == nil {
		e.Code, e.Message, e.RequestID = truncate(x.Code, 100), truncate(x.Message, 500), truncate(x.RequestID, 100)
	}
	if e.Code == "" {
		// A HEAD response has no body; name the common cases anyway.
		switch resp.StatusCode {
		case http.StatusNotFound:
			e.Code = "NotFound"
		case http.StatusForbidden:
			e.Code = "Forbidden"
		default:
			e.Code = http.StatusText(resp.StatusCode)
		}
	}
	return e
}

func isBucketMissing(err error) bool {
	var se *Error
	return errors.As(err, &se) && se.Code == "NoSuchBucket"
}
