package api

import "time"

// DefaultSession is the session every sandbox has without creating it.
const DefaultSession = "default"

// CreateSessionRequest is the body of POST /v1/sandboxes/{id}/sessions.
type CreateSessionRequest struct {
	// Name is 1 to 64 letters, digits, '.', '_' or '-'.
	Name string `json:"name"`
	// Cwd is the shell's starting directory; "" = the user's home.
	Cwd string `json:"cwd,omitempty"`
	// Env is exported in the shell; names must be valid shell variables.
	Env map[string]string `json:"env,omitempty"`
	// User is "user" (default) or "root"; every command of the session
	// runs as this user.
	User string `json:"user,omitempty"`
}

// Session is a persistent shell in a sandbox.
type Session struct {
	Name string `json:"name"`
	User string `json:"user"`
	// Cwd is the shell's current directory.
	Cwd   string            `json:"cwd"`
	Env   map[string]string `json:"env,omitempty"`
	Shell string            `json:"shell"`
	Pid   uint32            `json:"pid"`
	// Busy is true while a command runs; Queued commands wait behind it.
	Busy     bool   `json:"busy"`
	Queued   int    `json:"queued"`
	Commands uint64 `json:"commands"`
	// Restarts counts shells replaced after a command ended or wedged one.
	Restarts  int       `json:"restarts"`
	CreatedAt time.Time `json:"created_at"`
	// ShellEnded is true when the shell ended while no command ran (a
	// kill-all, a job that killed it); Pid is then 0, and the next command
	// starts a fresh shell. ShellSignal names the signal that ended it
	// ("SIGKILL"); ShellExitCode is set when it exited by itself.
	ShellEnded    bool   `json:"shell_ended,omitempty"`
	ShellSignal   string `json:"shell_signal,omitempty"`
	ShellExitCode *int   `json:"shell_exit_code,omitempty"`
}

// SessionList is the body of GET /v1/sandboxes/{id}/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}
