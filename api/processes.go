package api

import "time"

// Background process statuses.
const (
	ProcessStarting = "starting"
	ProcessRunning  = "running"
	ProcessExited   = "exited"
	ProcessKilled   = "killed"
	ProcessFailed   = "failed"
)

// Wait conditions of POST /v1/sandboxes/{id}/processes/{pid}/wait.
const (
	WaitExit = "exit"
	WaitPort = "port"
	WaitHTTP = "http"
	WaitLog  = "log"
)

// Log event types of GET /v1/sandboxes/{id}/processes/{pid}/logs.
const (
	LogStdout = "stdout"
	LogStderr = "stderr"
	LogGap    = "gap"
	LogEnd    = "end"
)

// Bounds on a process's log ring buffers (bytes per stream).
const (
	DefaultLogBufferBytes = 1 << 20
	MinLogBufferBytes     = 4 << 10
	MaxLogBufferBytes     = 16 << 20
)

// StartProcessRequest is the body of POST /v1/sandboxes/{id}/processes.
type StartProcessRequest struct {
	// ID names the process: 1 to 64 letters, digits, '.', '_' or '-',
	// starting with a letter; "" = generated. An ended process's id may be
	// reused.
	ID string `json:"id,omitempty"`
	// Cmd is argv; Cmd[0] is looked up in PATH inside the sandbox.
	Cmd  []string          `json:"cmd"`
	Env  map[string]string `json:"env,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
	User string            `json:"user,omitempty"`
	// LogBufferBytes is the ring buffer size per stream; 0 = 1 MiB.
	LogBufferBytes int64 `json:"log_buffer_bytes,omitempty"`
}

// LogInfo describes one output stream's ring buffer. Offsets count bytes
// written since the process started.
type LogInfo struct {
	// Start is the offset of the oldest byte kept; End of the next byte.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Truncated is true when older output was dropped (Start > 0).
	Truncated bool  `json:"truncated"`
	Capacity  int64 `json:"capacity"`
}

// Process is a background process.
type Process struct {
	ID     string   `json:"id"`
	Pid    uint32   `json:"pid"`
	Cmd    []string `json:"cmd"`
	Cwd    string   `json:"cwd,omitempty"`
	User   string   `json:"user,omitempty"`
	Status string   `json:"status"`
	// ExitCode is set when the process exited by itself.
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal that ended a killed process.
	Signal string `json:"signal,omitempty"`
	// Error says why a failed process could not start.
	Error     string     `json:"error,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Stdout    LogInfo    `json:"stdout"`
	Stderr    LogInfo    `json:"stderr"`
}

// ProcessList is the body of GET /v1/sandboxes/{id}/processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// KillProcessRequest is the body of POST .../processes/{pid}/kill.
type KillProcessRequest struct {
	// Signal is a name ("SIGTERM", "TERM") or number; default SIGTERM.
	Signal string `json:"signal,omitempty"`
	// Grace (Go duration) is how long after Signal the process group gets
	// SIGKILL; default "10s", "0s" = send Signal only.
	Grace string `json:"grace,omitempty"`
}

// WaitProcessRequest is the body of POST .../processes/{pid}/wait.
type WaitProcessRequest struct {
	// For is "exit", "port", "http" or "log".
	For string `json:"for"`
	// Port is the TCP port for "port" and "http" (on the sandbox's loopback).
	Port int `json:"port,omitempty"`
	// Path and Status are the HTTP GET and the status it must answer
	// (default "/" and 200) for "http".
	Path   string `json:"path,omitempty"`
	Status int    `json:"status,omitempty"`
	// Pattern is an RE2 regular expression a line of output must match
	// for "log"; Stream picks "stdout", "stderr" or "both" (default).
	Pattern string `json:"pattern,omitempty"`
	Stream  string `json:"stream,omitempty"`
	// Timeout (Go duration), default "30s", at most "1h".
	Timeout string `json:"timeout,omitempty"`
}

// WaitResult is the body of a successful wait.
type WaitResult struct {
	Process Process `json:"process"`
	// Matched is the line that satisfied a "log" wait.
	Matched string `json:"matched,omitempty"`
}

// ProcessLogEvent is one line of the NDJSON log stream: "stdout" and
// "stderr" carry Data at Offset; "gap" says Dropped bytes of Stream from
// Offset on were no longer kept; "end" (followed streams only) carries the
// ended process.
type ProcessLogEvent struct {
	Type    string   `json:"type"`
	Stream  string   `json:"stream,omitempty"`
	Offset  int64    `json:"offset,omitempty"`
	Data    []byte   `json:"data,omitempty"`
	Dropped int64    `json:"dropped,omitempty"`
	Process *Process `json:"process,omitempty"`
}
