// Package reply is how the agent answers a failure in each of its
// protocols: a Connect error whose code the daemon's client maps back, or
// envd's JSON error body with the status envd gives each kind of error
// (errhttp.Envd). The message a client sees is the error's own, without the
// sentinel's text, which the code or status carries.
package reply

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/errdefs/errconnect"
	"github.com/paddock-dev/paddock/internal/errdefs/errhttp"
)

// RPC turns an error from the vocabulary into a Connect error whose
// code the client maps back.
func RPC(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return connect.NewError(errconnect.Code(err), errors.New(Public(err)))
}

// Public strips the sentinel's own text, which the code carries.
func Public(err error) string {
	msg := err.Error()
	for _, s := range []error{errdefs.ErrNotFound, errdefs.ErrInvalidArgument, errdefs.ErrConflict,
		errdefs.ErrPermissionDenied, errdefs.ErrResourceExhausted, errdefs.ErrFailedPrecondition,
		errdefs.ErrUnavailable} {
		if trimmed, ok := strings.CutSuffix(msg, ": "+s.Error()); ok {
			return trimmed
		}
	}
	return msg
}

// httpError is envd's error body.
type httpError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

// Status writes envd's error body with status and msg.
func Status(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(httpError{Message: msg, Code: status})
}

// Error writes err as envd's error body, with the status envd gives its
// kind.
func Error(w http.ResponseWriter, err error) {
	Status(w, errhttp.Envd.StatusOf(err), Public(err))
}
