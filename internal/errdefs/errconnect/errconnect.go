// Package errconnect is the table between the error vocabulary
// (internal/errdefs) and Connect codes, for the agent's RPC services and
// the daemon's client of them (and so for E2B's SDKs, which call envd's
// services through the data plane).
package errconnect

import (
	"context"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// codes maps every class to a Connect code. Connect has no "payload too
// large": a message over the limit is resource_exhausted, as Connect's
// own read limit says.
var codes = map[string]connect.Code{
	api.CodeNotFound:           connect.CodeNotFound,
	api.CodeConflict:           connect.CodeAlreadyExists,
	api.CodeInvalidArgument:    connect.CodeInvalidArgument,
	api.CodeResourceExhausted:  connect.CodeResourceExhausted,
	api.CodeUnavailable:        connect.CodeUnavailable,
	api.CodeDeadlineExceeded:   connect.CodeDeadlineExceeded,
	api.CodePermissionDenied:   connect.CodePermissionDenied,
	api.CodeUnauthenticated:    connect.CodeUnauthenticated,
	api.CodeFailedPrecondition: connect.CodeFailedPrecondition,
	api.CodePayloadTooLarge:    connect.CodeResourceExhausted,
	api.CodeCanceled:           connect.CodeCanceled,
	api.CodeInternal:           connect.CodeInternal,
}

// sentinels maps Connect codes back to the vocabulary; a code not listed
// (internal, unknown, data loss, ...) is an internal error.
var sentinels = map[connect.Code]error{
	connect.CodeNotFound:           errdefs.ErrNotFound,
	connect.CodeAlreadyExists:      errdefs.ErrConflict,
	connect.CodeInvalidArgument:    errdefs.ErrInvalidArgument,
	connect.CodeOutOfRange:         errdefs.ErrInvalidArgument,
	connect.CodeResourceExhausted:  errdefs.ErrResourceExhausted,
	connect.CodeUnavailable:        errdefs.ErrUnavailable,
	connect.CodeDeadlineExceeded:   errdefs.ErrDeadlineExceeded,
	connect.CodePermissionDenied:   errdefs.ErrPermissionDenied,
	connect.CodeUnauthenticated:    errdefs.ErrUnauthenticated,
	connect.CodeFailedPrecondition: errdefs.ErrFailedPrecondition,
	connect.CodeCanceled:           context.Canceled,
}

// Code is the Connect code of an error, by its class.
func Code(err error) connect.Code {
	if c, ok := codes[errdefs.Code(err)]; ok {
		return c
	}
	return connect.CodeInternal
}

// Sentinel is the vocabulary's error for a Connect code (context.Canceled
// for canceled), or nil for an internal error.
func Sentinel(code connect.Code) error { return sentinels[code] }
