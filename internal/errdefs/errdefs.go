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

// Class is one class of the vocabulary: its stable api code and, for every
// class but canceled and internal, its sentinel.
type Class struct {
	Code string
	Err  error
}

// classes is the vocabulary, in the order Code tests them: an error that
// wraps two sentinels takes the first one's class.
var classes = []Class{
	{api.CodeNotFound, ErrNotFound},
	{api.CodeConflict, ErrConflict},
	{api.CodeInvalidArgument, ErrInvalidArgument},
	{api.CodeResourceExhausted, ErrResourceExhausted},
	{api.CodeUnavailable, ErrUnavailable},
	{api.CodeDeadlineExceeded, ErrDeadlineExceeded},
	{api.CodePermissionDenied, ErrPermissionDenied},
	{api.CodeUnauthenticated, ErrUnauthenticated},
	{api.CodeFailedPrecondition, ErrFailedPrecondition},
	{api.CodePayloadTooLarge, ErrPayloadTooLarge},
	{api.CodeCanceled, nil},
	{api.CodeInternal, nil},
}

// Classes returns every class of the vocabulary. The tables that map
// classes to a protocol's statuses (errhttp, errconnect, the E2B API) test
// that they map each one, so a new class cannot go unmapped.
func Classes() []Class { return append([]Class(nil), classes...) }

// Code maps an error to its stable api code. Unknown errors are "internal".
func Code(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range classes {
		if c.Err != nil && errors.Is(err, c.Err) {
			return c.Code
		}
		if c.Code == api.CodeDeadlineExceeded && errors.Is(err, context.DeadlineExceeded) {
			return c.Code
		}
	}
	if errors.Is(err, context.Canceled) {
		return api.CodeCanceled
	}
	return api.CodeInternal
}

// FromCode is the inverse of Code, for clients: it returns the sentinel for
// a code, context.Canceled for canceled, or nil for internal and unknown
// codes.
func FromCode(code string) error {
	if code == api.CodeCanceled {
		return context.Canceled
	}
	for _, c := range classes {
		if c.Code == code {
			return c.Err
		}
	}
	return nil
}

// ErrUnauthenticatedf returns an ErrUnauthenticated with a message.
func ErrUnauthenticatedf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrUnauthenticated)
}
