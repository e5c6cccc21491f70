package api

import "time"

// Watch event types: filesystem changes, then "end" when the watch stops
// (the sandbox stopped) or "error" when it broke.
const (
	WatchCreate = "create"
	WatchWrite  = "write"
	WatchRemove = "remove"
	WatchRename = "rename"
	WatchChmod  = "chmod"
	WatchStart  = "start"
	WatchEnd    = "end"
	WatchError  = "error"
)

// WatchEvent is one line of GET /v1/sandboxes/{id}/watch. Path is relative
// to the watched directory. The first event is "start" (the watch is in
// place); the last is "end" or "error".
type WatchEvent struct {
	Type   string `json:"type"`
	Path   string `json:"path,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// ExposeRequest is the body of POST /v1/sandboxes/{id}/previews.
type ExposeRequest struct {
	Port int `json:"port"`
}

// Preview is one exposed port. URL, PathURL and Token are only in the
// answer to the expose that created the token: the daemon keeps only a
// hash of it.
type Preview struct {
	Port int `json:"port"`
	// URL is http://{port}-{id}-{token}.{domain}:{listen port}/.
	URL string `json:"url,omitempty"`
	// PathURL is the form for hosts without wildcard DNS; it needs the
	// token in the X-Paddock-Preview-Token header or the paddock_token
	// query parameter (which becomes a cookie scoped to that path).
	PathURL   string    `json:"path_url,omitempty"`
	Token     string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// PreviewList is the answer of GET /v1/sandboxes/{id}/previews.
type PreviewList struct {
	Previews []Preview `json:"previews"`
}

// PreviewTokenHeader carries the token for the path form of preview URLs.
const PreviewTokenHeader = "X-Paddock-Preview-Token"

// PreviewTokenParam is the query-parameter form of PreviewTokenHeader.
const PreviewTokenParam = "paddock_token"

// Terminal is one PTY session in a sandbox. It outlives the WebSocket
// that created it: a client may reattach by id and gets the recent output
// replayed.
type Terminal struct {
	ID        string    `json:"id"`
	Pid       uint32    `json:"pid"`
	Cmd       []string  `json:"cmd"`
	Cols      int       `json:"cols"`
	Rows      int       `json:"rows"`
	Attached  int       `json:"attached"`
	Exited    bool      `json:"exited"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// TerminalList is the answer of GET /v1/sandboxes/{id}/terminals.
type TerminalList struct {
	Terminals []Terminal `json:"terminals"`
}

// PTY control message types. Binary WebSocket frames carry terminal bytes
// both ways; text frames carry one PTYMessage each.
const (
	// Client to daemon.
	PTYResize = "resize" // Cols, Rows
	PTYSignal = "signal" // Signal: SIGINT, SIGQUIT, SIGTSTP (as the keys do, to the foreground job), SIGTERM, SIGKILL
	// Daemon to client.
	PTYReady = "ready" // Terminal; sent first, before the replayed output
	PTYExit  = "exit"  // ExitCode, Signal; the last message
	PTYError = "error" // Error
)

// PTYMessage is a control message on the PTY WebSocket.
type PTYMessage struct {
	Type     string    `json:"type"`
	Cols     int       `json:"cols,omitempty"`
	Rows     int       `json:"rows,omitempty"`
	Signal   string    `json:"signal,omitempty"`
	Terminal *Terminal `json:"terminal,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Error    *Error    `json:"error,omitempty"`
}

// Bounds on terminals.
const (
	MaxTerminals     = 64 // per sandbox
	MaxTerminalCols  = 1000
	MaxTerminalRows  = 1000
	TerminalReplayKB = 256 // recent output kept per terminal for reattach
)
