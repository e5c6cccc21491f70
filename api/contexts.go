package api

import "time"

// Code context languages.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
)

// Run event types beyond the exec ones (EventStart, EventStdout,
// EventStderr, EventEnd).
const (
	RunEventResult = "result"
	RunEventError  = "error"
)

// Run statuses, in RunCodeEvent.Status on end.
const (
	RunOK      = "ok"
	RunError   = "error"
	RunTimeout = "timeout"
	RunDead    = "dead"
)

// CreateContextRequest is the body of POST /v1/sandboxes/{id}/contexts.
type CreateContextRequest struct {
	// ID is 1 to 64 letters, digits, '.', '_' or '-'.
	ID string `json:"id"`
	// Language is "python" (default) or "javascript" (needs node in the
	// image).
	Language string `json:"language,omitempty"`
	// Cwd is the interpreter's working directory; "" = the user's home.
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// User is "user" (default) or "root".
	User string `json:"user,omitempty"`
}

// CodeContext is a persistent interpreter in a sandbox.
type CodeContext struct {
	ID          string `json:"id"`
	Language    string `json:"language"`
	User        string `json:"user"`
	Cwd         string `json:"cwd"`
	Pid         uint32 `json:"pid"`
	Interpreter string `json:"interpreter"`
	// State is "idle", "busy" or "dead".
	State string `json:"state"`
	Runs  uint64 `json:"runs"`
	// Error says why a dead context died.
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// CodeContextList is the body of GET /v1/sandboxes/{id}/contexts.
type CodeContextList struct {
	Contexts []CodeContext `json:"contexts"`
}

// RunCodeRequest is the body of POST /v1/sandboxes/{id}/contexts/{ctx}/run.
type RunCodeRequest struct {
	Code string `json:"code"`
	// Timeout bounds the run (a Go duration); when it passes the code is
	// interrupted (SIGINT), and killed with its context if it does not
	// stop. "" = the daemon's exec timeout.
	Timeout string `json:"timeout,omitempty"`
	// QueueTimeout bounds the wait behind the context's earlier runs.
	QueueTimeout string `json:"queue_timeout,omitempty"`
	// Env holds variables for this run only: set in the interpreter's
	// environment when the run starts (so processes it starts inherit
	// them) and given their earlier values back when it ends.
	Env map[string]string `json:"env,omitempty"`
}

// CodeError is an exception raised by a run.
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// RunCodeEvent is one line of a run's NDJSON stream: start, then stdout,
// stderr, result and error events, then exactly one end.
type RunCodeEvent struct {
	Type string `json:"type"`
	// ExecutionCount numbers the context's runs, on start.
	ExecutionCount uint64 `json:"execution_count,omitempty"`
	// Data is output bytes on stdout and stderr.
	Data []byte `json:"data,omitempty"`
	// Result is a value's representations keyed by MIME type (text/plain,
	// application/json, image/png as base64, image/svg+xml, text/html).
	Result map[string]string `json:"result,omitempty"`
	// Main marks the value of the code's last expression; other results
	// are displayed values such as figures.
	Main  bool       `json:"main,omitempty"`
	Error *CodeError `json:"error,omitempty"`
	// Status is set on end: ok, error, timeout or dead.
	Status   string `json:"status,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// ContextDead is true on end when the interpreter did not survive the
	// run; delete the context and create it again.
	ContextDead bool   `json:"context_dead,omitempty"`
	Note        string `json:"note,omitempty"`
	DurationMs  int64  `json:"duration_ms,omitempty"`
}
