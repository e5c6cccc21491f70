// Package api holds the wire types of Paddock's REST API (/v1), shared by the
// server, the Go SDK and the CLI. It imports nothing from internal/.
//
// Routes (all JSON unless stated; {id} is a sandbox id or name; file routes
// take ?user=NAME, default "user", and resolve relative paths against that
// user's home inside the sandbox):
//
//	GET    /v1/health                          -> Health
//	GET    /v1/openapi.json                    -> OpenAPI 3 document
//	POST   /v1/sandboxes                       CreateSandboxRequest -> Sandbox (201)
//	GET    /v1/sandboxes?label=k=v&label=...   -> SandboxList
//	GET    /v1/sandboxes/{id}                  -> Sandbox
//	DELETE /v1/sandboxes/{id}                  -> 204
//	POST   /v1/sandboxes/{id}/stop             -> Sandbox
//	POST   /v1/sandboxes/{id}/start            -> Sandbox
//	GET    /v1/sandboxes/{id}/history          -> History (state changes with reasons)
//	POST   /v1/sandboxes/{id}/exec             ExecRequest -> NDJSON stream of ExecEvent
//	GET    /v1/sandboxes/{id}/files?path=P     -> raw bytes (application/octet-stream)
//	PUT    /v1/sandboxes/{id}/files?path=P     raw body -> FileInfo (parents created)
//	GET    /v1/sandboxes/{id}/files/list?path=P      -> FileList
//	GET    /v1/sandboxes/{id}/files/stat?path=P      -> FileInfo
//	POST   /v1/sandboxes/{id}/files/mkdir      PathRequest -> FileInfo
//	POST   /v1/sandboxes/{id}/files/move       MoveRequest -> FileInfo
//	DELETE /v1/sandboxes/{id}/files?path=P     -> 204
//	GET    /v1/sandboxes/{id}/tar?path=P       -> application/x-tar of the directory P
//	PUT    /v1/sandboxes/{id}/tar?path=P       application/x-tar body, extracted under P -> 204
//	GET    /v1/sandboxes/{id}/layer            -> application/x-tar of the writable layer (changes vs. the image)
//	GET    /v1/images                          -> ImageList
//	POST   /v1/images/{name}/build             -> NDJSON stream of BuildEvent
//	POST   /v1/keys                            CreateKeyRequest -> CreatedKey (201; secret shown once)
//	GET    /v1/keys                            -> KeyList
//	DELETE /v1/keys/{id}                       -> 204
package api

import "time"

// Sandbox states. The transition table lives in internal/controller.
const (
	StateCreating   = "creating"
	StateRunning    = "running"
	StatePaused     = "paused"
	StateStopping   = "stopping"
	StateStopped    = "stopped"
	StateDestroying = "destroying"
	StateDestroyed  = "destroyed"
	StateError      = "error"
)

// Runtime names a caller may ask for.
const (
	RuntimeRunc   = "runc"
	RuntimeGVisor = "gvisor"
)

// Resources is a sandbox's size. Zero fields take the daemon's defaults.
type Resources struct {
	// CPU in vCPUs (0.5 = half a core).
	CPU float64 `json:"cpu,omitempty"`
	// MemoryMB is the memory limit in MiB; swap is never allowed.
	MemoryMB int64 `json:"memory_mb,omitempty"`
	// DiskMB caps the sandbox's writable layer in MiB.
	DiskMB int64 `json:"disk_mb,omitempty"`
	// Pids caps the number of processes and threads.
	Pids int64 `json:"pids,omitempty"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	Name      string            `json:"name,omitempty"`
	Image     string            `json:"image,omitempty"`   // "base" (default), "busybox", or sha256:<hex>
	Runtime   string            `json:"runtime,omitempty"` // "runc" (default) or "gvisor"
	Resources Resources         `json:"resources,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// SleepAfter is a Go duration ("10m"); idle this long, the sandbox stops.
	SleepAfter string `json:"sleep_after,omitempty"`
	// KeepAlive disables the idle stop.
	KeepAlive bool `json:"keep_alive,omitempty"`
	// Timeout is the hard lifetime (Go duration); at its end the sandbox is destroyed.
	Timeout string `json:"timeout,omitempty"`
}

// Sandbox is what the API says about one sandbox.
type Sandbox struct {
	ID             string            `json:"id"`
	Name           string            `json:"name,omitempty"`
	State          string            `json:"state"`
	ErrorReason    string            `json:"error_reason,omitempty"`
	Image          string            `json:"image"`
	ImageDigest    string            `json:"image_digest"`
	Runtime        string            `json:"runtime"`
	Resources      Resources         `json:"resources"`
	Env            map[string]string `json:"env,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	SleepAfter     string            `json:"sleep_after,omitempty"`
	KeepAlive      bool              `json:"keep_alive"`
	Timeout        string            `json:"timeout,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	LastActivityAt time.Time         `json:"last_activity_at"`
	ExpiresAt      *time.Time        `json:"expires_at,omitempty"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec.
type ExecRequest struct {
	// Cmd is argv; Cmd[0] is looked up in PATH inside the sandbox.
	Cmd []string          `json:"cmd"`
	Env map[string]string `json:"env,omitempty"`
	Cwd string            `json:"cwd,omitempty"`
	// User is "user" (default) or "root".
	User string `json:"user,omitempty"`
	// Stdin is fed to the process, then stdin is closed. At most MaxExecStdin bytes.
	Stdin []byte `json:"stdin,omitempty"`
	// Timeout (Go duration) kills the process when it runs longer; "" = the daemon default.
	Timeout string `json:"timeout,omitempty"`
}

// MaxExecStdin bounds ExecRequest.Stdin.
const MaxExecStdin = 16 << 20

// Exec event types, in stream order: one start, any stdout/stderr, one end.
const (
	EventStart  = "start"
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventEnd    = "end"
)

// ExecEvent is one line of the NDJSON exec stream. Data is base64 in JSON
// (a []byte), so binary output survives.
type ExecEvent struct {
	Type string `json:"type"`
	Pid  uint32 `json:"pid,omitempty"`
	Data []byte `json:"data,omitempty"`
	// ExitCode is set on end. -1 when the process was killed by a signal
	// or never started; see Error and Signal.
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// TimedOut is true on end when the exec's timeout killed it.
	TimedOut bool `json:"timed_out,omitempty"`
	// Error is set on end when the stream failed; the command's real
	// status is then unknown, and ExitCode is absent.
	Error *Error `json:"error,omitempty"`
}

// FileInfo describes one file inside a sandbox.
type FileInfo struct {
	Name          string    `json:"name"`
	Path          string    `json:"path"`
	Type          string    `json:"type"` // "file", "dir", "symlink", "other"
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"`
	Owner         string    `json:"owner,omitempty"`
	Group         string    `json:"group,omitempty"`
	ModifiedAt    time.Time `json:"modified_at"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// FileList is the body of GET /v1/sandboxes/{id}/files/list.
type FileList struct {
	Entries []FileInfo `json:"entries"`
}

// PathRequest names one path.
type PathRequest struct {
	Path string `json:"path"`
}

// MoveRequest renames Source to Destination.
type MoveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// Image is one image in the image store.
type Image struct {
	Name      string    `json:"name"`
	Digest    string    `json:"digest"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
}

// ImageList is the body of GET /v1/images.
type ImageList struct {
	Images []Image `json:"images"`
}

// BuildEvent is one line of an image build's NDJSON progress stream.
type BuildEvent struct {
	Type    string `json:"type"` // "progress", "log", "done", "error"
	Message string `json:"message,omitempty"`
	Image   *Image `json:"image,omitempty"`
	Error   *Error `json:"error,omitempty"`
}

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	Name string `json:"name"`
}

// Key is an API key's public record; its secret is stored only hashed.
type Key struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Prefix    string    `json:"prefix"`
	CreatedAt time.Time `json:"created_at"`
}

// CreatedKey is returned once, at creation: Secret is never shown again.
type CreatedKey struct {
	Key
	Secret string `json:"secret"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// Health is the body of GET /v1/health.
type Health struct {
	Status   string   `json:"status"`
	Version  string   `json:"version"`
	Runtimes []string `json:"runtimes"`
}

// StateChange is one recorded lifecycle transition.
type StateChange struct {
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// History is the body of GET /v1/sandboxes/{id}/history.
type History struct {
	Changes []StateChange `json:"changes"`
}
