// Package errhttp holds the tables that turn the error vocabulary
// (internal/errdefs) into HTTP statuses: one per HTTP protocol Paddock
// speaks. API is Paddock's own /v1; Envd is the agent's envd-compatible
// file API; the E2B control plane derives its table from API with named
// overrides (internal/e2b). Each table maps every class: its package's
// tests check that against errdefs.Classes.
package errhttp

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"net/http"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// StatusClientClosedRequest is the status of a request its client gave up
// (nginx's 499): logged, never seen by the client.
const StatusClientClosedRequest = 499

// Table maps api error codes to HTTP statuses.
type Table map[string]int

// API is Paddock's /v1 API, as api/openapi.json documents it.
// resource_exhausted (a quota, the host's memory or disk) is 429: retry
// later or ask for less.
var API = Table{
	api.CodeNotFound:           http.StatusNotFound,
	api.CodeConflict:           http.StatusConflict,
	api.CodeInvalidArgument:    http.StatusBadRequest,
	api.CodeResourceExhausted:  http.StatusTooManyRequests,
	api.CodeUnavailable:        http.StatusServiceUnavailable,
	api.CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	api.CodePermissionDenied:   http.StatusForbidden,
	api.CodeUnauthenticated:    http.StatusUnauthorized,
	api.CodeFailedPrecondition: http.StatusPreconditionFailed,
	api.CodePayloadTooLarge:    http.StatusRequestEntityTooLarge,
	api.CodeCanceled:           StatusClientClosedRequest,
	api.CodeInternal:           http.StatusInternalServerError,
}

// Envd is the agent's envd-compatible HTTP file API (GET and POST
// /files), which E2B's SDKs call directly: envd answers a full disk with
// 507, which the SDKs raise as NotEnoughSpaceError.
var Envd = API.With(Table{
	api.CodeResourceExhausted: http.StatusInsufficientStorage,
})

// With returns a copy of t with the overrides applied.
func (t Table) With(overrides Table) Table {
	out := maps.Clone(t)
	maps.Copy(out, overrides)
	return out
}

// Status is the status of an api error code; a code the table does not
// know is an internal error.
func (t Table) Status(code string) int {
	if st, ok := t[code]; ok {
		return st
	}
	return t[api.CodeInternal]
}

// StatusOf is the status of an error, by its class.
func (t Table) StatusOf(err error) int { return t.Status(errdefs.Code(err)) }

// Missing lists the classes t does not map, for the tests of each table.
func (t Table) Missing() []string {
	var out []string
	for _, c := range errdefs.Classes() {
		if _, ok := t[c.Code]; !ok {
			out = append(out, c.Code)
		}
	}
	return out
}

// InternalLogger is implemented by a ResponseWriter wrapper of a handler
// chain that logs the details of internal errors (its request log).
type InternalLogger interface {
	LogInternal(ref string, err error)
}

// PublicMessage is the message a client may see for err. An internal
// error's text may carry host paths or database details, so the client
// gets only a reference, and the details go, with that reference, to the
// InternalLogger found on w's chain of wrappers (through Unwrap).
func PublicMessage(w http.ResponseWriter, err error) string {
	var l InternalLogger
	for w != nil {
		if il, ok := w.(InternalLogger); ok {
			l = il
			break
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return PublicMessageTo(l, err)
}

// PublicMessageTo is PublicMessage for a stream that has no
// ResponseWriter (a websocket): l (which may be nil) logs the details.
func PublicMessageTo(l InternalLogger, err error) string {
	if errdefs.Code(err) != api.CodeInternal {
		return err.Error()
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	ref := hex.EncodeToString(b)
	if l != nil {
		l.LogInternal(ref, err)
	}
	return "internal error (reference " + ref + "): the daemon's log has the details"
}
