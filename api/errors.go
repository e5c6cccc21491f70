package api

// Stable error codes carried in Error.Code. Clients switch on these, never on
// messages or HTTP statuses.
const (
	CodeNotFound           = "not_found"
	CodeConflict           = "conflict"
	CodeInvalidArgument    = "invalid_argument"
	CodeResourceExhausted  = "resource_exhausted"
	CodeUnavailable        = "unavailable"
	CodeDeadlineExceeded   = "deadline_exceeded"
	CodePermissionDenied   = "permission_denied"
	CodeUnauthenticated    = "unauthenticated"
	CodeFailedPrecondition = "failed_precondition"
	// CodePayloadTooLarge is a request body over the route's limit (413).
	CodePayloadTooLarge = "payload_too_large"
	CodeCanceled        = "canceled"
	CodeInternal        = "internal"
)

// Error is the JSON body of every non-2xx response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }
