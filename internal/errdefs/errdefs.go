// Package errdefs is Paddock's one error vocabulary. Every error that crosses
// a package boundary wraps one of these sentinels with %w; the server turns
// them into HTTP statuses and stable api codes in exactly one place.
package errdefs

import (
	"context"
	"errors"
	"fmt"

	"github.com/paddock-dev/paddock/api"
)

// Sentinels. Wrap them: fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound).
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
	// ErrPayloadTooLarge is a request body over its route's limit (413).
	ErrPayloadTooLarge = errors.New("payload too large")
)

// Invalid returns an ErrInvalidArgument with a message safe to show a user.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidArgument)
}

// NotFound returns an ErrNotFound naming what was missing.
func NotFound(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotFound)
}

// Code maps an error to its stable api code. Unknown errors are "internal".
func Code(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotFound):
		return api.CodeNotFound
	case errors.Is(err, ErrConflict):
		return api.CodeConflict
	case errors.Is(err, ErrInvalidArgument):
		return api.CodeInvalidArgument
	case errors.Is(err, ErrResourceExhausted):
		return api.CodeResourceExhausted
	case errors.Is(err, ErrUnavailable):
		return api.CodeUnavailable
	case errors.Is(err, ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return api.CodeDeadlineExceeded
	case errors.Is(err, ErrPermissionDenied):
		return api.CodePermissionDenied
	case errors.Is(err, ErrUnauthenticated):
		return api.CodeUnauthenticated
	case errors.Is(err, ErrFailedPrecondition):
		return api.CodeFailedPrecondition
	case errors.Is(err, ErrPayloadTooLarge):
		return api.CodePayloadTooLarge
	case errors.Is(err, context.Canceled):
		return api.CodeCanceled
	default:
		return api.CodeInternal
	}
}

// FromCode is the inverse of Code, for clients: it returns the sentinel for
// a code, or nil for an unknown one.
func FromCode(code string) error {
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
	}
	return nil
}

// ErrUnauthenticatedf returns an ErrUnauthenticated with a message.
func ErrUnauthenticatedf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrUnauthenticated)
}
