package paddock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/paddock-dev/paddock/api"
)

// Sentinels. An *APIError matches the one for its code; errors the client
// makes itself wrap one of them.
var (
	ErrNotFound           = errors.New("not found")
	ErrConflict           = errors.New("conflict")
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrUnavailable        = errors.New("unavailable")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrPayloadTooLarge: a request body over the route's limit (413).
	ErrPayloadTooLarge = errors.New("payload too large")
)

// APIError is an error reported by the daemon.
type APIError struct {
	// Status is the HTTP status; 200 for an error carried inside a stream.
	Status int
	// Code is one of the stable api.Code* values.
	Code string
	// Message is safe to show a user.
	Message string
	// retryAfter is the response's Retry-After, in seconds, if it had one.
	retryAfter time.Duration
}

func (e *APIError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Code != "" {
		return strings.ReplaceAll(e.Code, "_", " ")
	}
	return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
}

// Is makes errors.Is(err, ErrNotFound) true for a not_found APIError, and
// likewise for every code with a sentinel.
func (e *APIError) Is(target error) bool {
	if s := sentinelFor(e.Code); s != nil {
		return target == s
	}
	return false
}

func sentinelFor(code string) error {
	switch code {
	case api.CodeNotFound:
		return ErrNotFound
	case api.CodeConflict:
		return ErrConflict
	case api.CodeInvalidArgument:
		return ErrInvalidArgument
	case api.CodeResourceExhausted:
		return ErrResourceExhausted
	case api.CodeUnavailable:
		return ErrUnavailable
	case api.CodeDeadlineExceeded:
		return ErrDeadlineExceeded
	case api.CodePermissionDenied:
		return ErrPermissionDenied
	case api.CodeUnauthenticated:
		return ErrUnauthenticated
	case api.CodeFailedPrecondition:
		return ErrFailedPrecondition
	case api.CodePayloadTooLarge:
		return ErrPayloadTooLarge
	case api.CodeCanceled:
		return context.Canceled
	}
	return nil
}

// codeForStatus guesses a code when a response carries no api.Error body,
// e.g. from a proxy in front of the daemon.
func codeForStatus(status int) string {
	switch status {
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return api.CodeInvalidArgument
	case http.StatusRequestEntityTooLarge:
		return api.CodePayloadTooLarge
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return api.CodeResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return api.CodeUnavailable
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return api.CodeDeadlineExceeded
	case http.StatusForbidden:
		return api.CodePermissionDenied
	case http.StatusUnauthorized:
		return api.CodeUnauthenticated
	case http.StatusPreconditionFailed:
		return api.CodeFailedPrecondition
	}
	return api.CodeInternal
}

// decodeError reads a non-2xx response into an *APIError.
func decodeError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{Status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.retryAfter = time.Duration(min(s, 3600)) * time.Second
	}
	var ae api.Error
	if json.Unmarshal(body, &ae) == nil && ae.Code != "" {
		e.Code = ae.Code
		e.Message = sanitize(ae.Message)
		return e
	}
	e.Code = codeForStatus(resp.StatusCode)
	if msg := sanitize(string(body)); msg != "" {
		e.Message = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg)
	}
	return e
}

// streamError turns an api.Error carried inside a stream into an *APIError.
func streamError(ae *api.Error) error {
	code := ae.Code
	if code == "" {
		code = api.CodeInternal
	}
	return &APIError{Status: http.StatusOK, Code: code, Message: sanitize(ae.Message)}
}

// sanitize keeps a peer-supplied message printable and short, so it cannot
// smuggle terminal escapes into a user's screen.
func sanitize(s string) string {
	const max = 1024
	s = strings.TrimSpace(s)
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(' ')
		case unicode.IsPrint(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
