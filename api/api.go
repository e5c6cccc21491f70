// Package api holds the wire types of Paddock's REST API (/v1), shared by the
// server, the Go SDK and the CLI. It imports nothing from internal/.
//
// Every sandbox route also works under /v1/pools/{pool}/identifiers/{identifier}/,
// served by the sandbox bound to that identifier (docs/templates-pools.md).
//
// Routes (all JSON unless stated; {id} is a sandbox id or name; file routes
// take ?user=NAME, default "user", and resolve relative paths against that
// user's home inside the sandbox):
//
//	GET    /v1/health                          -> Health
//	GET    /v1/openapi.json                    -> OpenAPI 3 document
//	GET    /v1/metrics                         -> Prometheus text format (sandboxes by state, warm pools)
//	GET    /v1/info                            -> Info (runtimes probed at start, sizes, host limits, defaults)
//	GET    /v1/policy                          -> Policy
//	PUT    /v1/policy                          Policy -> Policy (unix socket only; docs/admission.md)
//	POST   /v1/sandboxes                       CreateSandboxRequest -> Sandbox (201)
//	GET    /v1/sandboxes?label=k=v&label=...   -> SandboxList
//	GET    /v1/events?usage=BOOL               -> NDJSON stream of Event
//	GET    /v1/stats                           -> HostStats (scope all or the socket)
//	GET    /v1/sandboxes/{id}                  -> Sandbox
//	DELETE /v1/sandboxes/{id}                  -> 204
//	POST   /v1/sandboxes/{id}/stop             -> Sandbox
//	POST   /v1/sandboxes/{id}/start            -> Sandbox
//	POST   /v1/sandboxes/{id}/pause            PauseRequest? -> Sandbox (memory and processes kept; to_disk hibernates)
//	POST   /v1/sandboxes/{id}/resume           -> Sandbox
//	GET    /v1/sandboxes/{id}/history          -> History (state changes with reasons)
//	POST   /v1/sandboxes/{id}/exec             ExecRequest -> NDJSON stream of ExecEvent
//	GET    /v1/sandboxes/{id}/files?path=P     -> raw bytes (application/octet-stream)
//	PUT    /v1/sandboxes/{id}/files?path=P&mode=0755  raw body -> FileInfo (parents created)
//	GET    /v1/sandboxes/{id}/files/list?path=P      -> FileList
//	GET    /v1/sandboxes/{id}/files/stat?path=P      -> FileInfo
//	POST   /v1/sandboxes/{id}/files/mkdir      PathRequest -> FileInfo
//	POST   /v1/sandboxes/{id}/files/move       MoveRequest -> FileInfo
//	DELETE /v1/sandboxes/{id}/files?path=P     -> 204
//	GET    /v1/sandboxes/{id}/tar?path=P       -> application/x-tar of the directory P
//	PUT    /v1/sandboxes/{id}/tar?path=P       application/x-tar body, extracted under P -> 204
//	GET    /v1/sandboxes/{id}/layer            -> application/x-tar of the writable layer (changes vs. the image)
//	POST   /v1/sandboxes/{id}/sessions         CreateSessionRequest -> Session (201; docs/sessions.md)
//	GET    /v1/sandboxes/{id}/sessions         -> SessionList
//	DELETE /v1/sandboxes/{id}/sessions/{session}  -> 204 (ends the shell and its jobs, never background processes)
//	POST   /v1/sandboxes/{id}/processes        StartProcessRequest -> Process (201)
//	GET    /v1/sandboxes/{id}/processes        -> ProcessList
//	GET    /v1/sandboxes/{id}/processes/{pid}  -> Process ({pid} is a process id or a pid)
//	GET    /v1/sandboxes/{id}/processes/{pid}/logs?stream=S&offset=N&follow=BOOL  -> NDJSON stream of ProcessLogEvent
//	POST   /v1/sandboxes/{id}/processes/{pid}/kill  KillProcessRequest -> Process
//	POST   /v1/sandboxes/{id}/processes/{pid}/wait  WaitProcessRequest -> WaitResult
//	GET    /v1/sandboxes/{id}/procs            -> ProcList (every process of the sandbox, the agent marked)
//	POST   /v1/sandboxes/{id}/procs/kill-all   KillAllRequest -> KillAllResult (all but the agent; body optional)
//	POST   /v1/sandboxes/{id}/contexts         CreateContextRequest -> CodeContext (201; docs/code-contexts.md)
//	GET    /v1/sandboxes/{id}/contexts         -> CodeContextList
//	DELETE /v1/sandboxes/{id}/contexts/{ctx}   -> 204 (ends the interpreter)
//	POST   /v1/sandboxes/{id}/contexts/{ctx}/run  RunCodeRequest -> NDJSON stream of RunCodeEvent
//	POST   /v1/sandboxes/{id}/snapshots        CreateSnapshotRequest -> Snapshot (201; files only, no memory or processes)
//	POST   /v1/sandboxes/{id}/fork             ForkRequest -> ForkResult (201)
//	GET    /v1/snapshots                       -> SnapshotList
//	GET    /v1/snapshots/{snapshot}            -> Snapshot
//	PATCH  /v1/snapshots/{snapshot}            UpdateSnapshotRequest -> Snapshot
//	DELETE /v1/snapshots/{snapshot}            -> 204
//	GET    /v1/snapshots/{snapshot}/export     -> application/x-tar (manifest + layer tars with sha256 checksums)
//	POST   /v1/snapshots/import?name=N&ttl=D   application/x-tar body -> Snapshot (201)
//	GET    /v1/sandboxes/{id}/ledger?after=N&limit=N -> Ledger (also after a destroy, for the retention period)
//	POST   /v1/sandboxes/{id}/ledger           AddLedgerEntryRequest -> LedgerEntry (201)
//	GET    /v1/sandboxes/{id}/network          -> NetworkPolicy
//	PUT    /v1/sandboxes/{id}/network          UpdateNetworkRequest -> NetworkPolicy
//	POST   /v1/sandboxes/{id}/network/injections Injection -> NetworkPolicy
//	DELETE /v1/sandboxes/{id}/network/injections?host=H&header=N -> NetworkPolicy
//	GET    /v1/secrets                         -> SecretList
//	PUT    /v1/secrets/{name}                  SetSecretRequest -> Secret (201 created, 200 replaced)
//	DELETE /v1/secrets/{name}                  -> 204 (409 while an injection rule uses it)
//	POST   /v1/workspaces                      CreateWorkspaceRequest -> Workspace (201; docs/workspaces.md)
//	GET    /v1/workspaces                      -> WorkspaceList
//	POST   /v1/workspaces/import?name=N&max_bytes=B&max_files=F  application/x-tar body -> Workspace (201)
//	GET    /v1/workspaces/{id}                 -> Workspace
//	DELETE /v1/workspaces/{id}                 -> 204 (with its history)
//	POST   /v1/workspaces/{id}/run             WorkspaceRunRequest -> WorkspaceRunResult (409 on a concurrent change)
//	GET    /v1/workspaces/{id}/versions?limit=N  -> WorkspaceHistory
//	GET    /v1/workspaces/{id}/diff?from=A&to=B  -> WorkspaceDiff
//	POST   /v1/workspaces/{id}/rollback        WorkspaceRollbackRequest -> WorkspaceRunResult
//	GET    /v1/workspaces/{id}/export          -> application/x-tar (workspace.json + contents/<sha256>)
//	GET    /v1/workspaces/{id}/files?path=P&version=N  -> application/octet-stream (X-Paddock-Workspace-Version, X-Paddock-File-Mode)
//	PUT    /v1/workspaces/{id}/files?path=P&mode=M&base=N  application/octet-stream body -> WorkspaceRunResult (409 when a version after N changed P)
//	GET    /v1/workspaces/{id}/ledger?after=S&limit=N  -> WorkspaceLedger
//	POST   /v1/workspaces/{id}/prune          WorkspacePruneRequest -> WorkspacePruneResult
//	POST   /v1/sandboxes/{id}/backups          CreateBackupRequest -> Backup (201)
//	GET    /v1/backups?sandbox=ID              -> BackupList
//	GET    /v1/backups/{backup}                -> Backup
//	DELETE /v1/backups/{backup}                -> 204
//	POST   /v1/backups/{backup}/restore        RestoreBackupRequest -> Backup
//	GET    /v1/sandboxes/{id}/pty?terminal=T&cmd=C&env=K=V&cwd=D&user=U&cols=N&rows=N  -> WebSocket: binary frames are terminal bytes, text frames PTYMessage (docs/terminals-watch-preview.md)
//	GET    /v1/sandboxes/{id}/terminals        -> TerminalList
//	DELETE /v1/sandboxes/{id}/terminals/{terminal}  -> 204 (kills its process group)
//	GET    /v1/sandboxes/{id}/watch?path=P&recursive=BOOL&include=G&exclude=G&user=U  -> NDJSON stream of WatchEvent
//	POST   /v1/sandboxes/{id}/previews         ExposeRequest -> Preview (201; the token is shown once)
//	GET    /v1/sandboxes/{id}/previews         -> PreviewList
//	DELETE /v1/sandboxes/{id}/previews/{port}  -> 204 (revokes the port's token)
//	GET    /v1/images                          -> ImageList
//	POST   /v1/images/{name}/build?if_missing=true  -> NDJSON stream of BuildEvent
//	POST   /v1/images/import?source=S          tar body (docker save or OCI layout) -> Image (201)
//	POST   /v1/images/pull                     PullImageRequest -> NDJSON stream of BuildEvent
//	DELETE /v1/images/{ref}?gc=true            -> RemoveImageResult (ref may be a digest or an escaped source)
//	POST   /v1/images/gc                       -> ImageGCResult
//	GET    /v1/images/{ref}/oci?prefix=P       -> OCI image layout tar, agent added (Paddock-Image-Ref: its reference)
//	POST   /v1/keys                            CreateKeyRequest -> CreatedKey (201; secret shown once)
//	GET    /v1/keys                            -> KeyList
//	DELETE /v1/keys/{id}                       -> 204
//	POST   /v1/templates/build                 application/x-tar body (template.json + context/) -> NDJSON stream of TemplateBuildEvent
//	GET    /v1/templates                       -> TemplateList
//	GET    /v1/templates/{template}            -> Template
//	DELETE /v1/templates/{template}            -> 204 (pools of it stop refilling)
//	GET    /v1/templates/{template}/tags       -> TemplateTagList (the tags of its name; {template} is name or name:tag)
//	POST   /v1/templates/{template}/tags       TagTemplateRequest -> TemplateTagList (its build gets the tags too)
//	GET    /v1/templates/{template}/oci?prefix=P  -> OCI tar of the image its sandboxes run on Kubernetes (base image, build layers, agent)
//	GET    /v1/pools                           -> PoolList
//	GET    /v1/pools/{pool}                    -> Pool
//	PUT    /v1/pools/{pool}                    SetPoolRequest -> Pool
//	DELETE /v1/pools/{pool}                    -> 204 (destroys its unclaimed sandboxes)
//	GET    /v1/pools/{pool}/identifiers/{identifier}       -> Sandbox (bound to the identifier; allocated from the pool on first use)
//	POST   /v1/pools/{pool}/identifiers/{identifier}/exec  ExecRequest -> NDJSON stream of ExecEvent
//	POST   /mcp?keep=BOOL                      JSON-RPC message -> JSON-RPC response or text/event-stream (MCP streamable HTTP; docs/mcp.md)
//	GET    /mcp                                -> text/event-stream of an MCP session's server messages
//	DELETE /mcp                                -> 204 (ends the MCP session named by the Mcp-Session-Id header)
package api

import "time"

// Sandbox states. The transition table lives in internal/controller.
const (
	StateCreating = "creating"
	StateRunning  = "running"
	StatePaused   = "paused"
	// StateHibernating: the sandbox's memory and processes are being
	// written to disk (gVisor's checkpoint).
	StateHibernating = "hibernating"
	// StateHibernated: memory and processes are on disk and no compute
	// runs; the next request restores it where it was.
	StateHibernated = "hibernated"
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
	Runtime   string            `json:"runtime,omitempty"` // "runc" (default), "gvisor" or "crun"
	Size      string            `json:"size,omitempty"`    // a preset (GET /v1/info); non-zero Resources fields override it
	Resources Resources         `json:"resources,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// SleepAfter is a Go duration ("10m"); idle this long, the sandbox stops.
	SleepAfter string `json:"sleep_after,omitempty"`
	// KeepAlive disables the idle stop.
	KeepAlive bool `json:"keep_alive,omitempty"`
	// Timeout is the hard lifetime (Go duration); at its end the sandbox is destroyed.
	Timeout string `json:"timeout,omitempty"`
	// FromSnapshot restores a snapshot (id or name) into the new sandbox:
	// its files, on the snapshot's image (Image may be left empty; another
	// image is refused). A memory snapshot resumes its processes too;
	// any other keeps files only (not memory, processes or mounts).
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// Network is the sandbox's network (default: mode none, loopback only).
	Network *NetworkPolicy `json:"network,omitempty"`
	// OnIdle is what sleep_after does: OnIdleStop (default), OnIdlePause
	// or OnIdleSnapshot.
	OnIdle string `json:"on_idle,omitempty"`
	// Template creates the sandbox from a built template (docs/templates-pools.md);
	// a ready sandbox of a matching warm pool is served when there is one.
	Template string `json:"template,omitempty"`
	// Pool takes the sandbox from this warm pool (its template); with
	// Identifier, the sandbox bound to that identifier is returned,
	// allocated from the pool on first use.
	Pool       string `json:"pool,omitempty"`
	Identifier string `json:"identifier,omitempty"`
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
	// FromSnapshot is the snapshot the sandbox was restored from (after an
	// idle snapshot, that one).
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// OnIdle is what idling does to the sandbox: stop, pause, snapshot
	// or hibernate.
	OnIdle string `json:"on_idle,omitempty"`
	// CreatedBy is the id of the API key that created the sandbox, or
	// CallerLocal for the unix socket.
	CreatedBy string `json:"created_by,omitempty"`
	// Network is the sandbox's network; absent means mode none.
	Network *NetworkPolicy `json:"network,omitempty"`
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
	// Session runs Cmd in that shell session (api.DefaultSession always
	// exists): the words of Cmd are joined with spaces into shell text,
	// and cwd, exported variables and functions carry over between
	// commands. Env, Cwd and Stdin are refused with a session.
	Session string `json:"session,omitempty"`
	// QueueTimeout (Go duration) bounds how long a session command waits
	// behind the session's earlier ones; "" = 10m.
	QueueTimeout string `json:"queue_timeout,omitempty"`
	// AllowHosts are host rules granted to an egress sandbox while this
	// command runs (docs/networking.md); not with Session.
	AllowHosts []string `json:"allow_hosts,omitempty"`
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
	// OOMKilled is true on end when the process died of SIGKILL while the
	// kernel's OOM killer was killing in the sandbox (runc sandboxes).
	OOMKilled bool `json:"oom_killed,omitempty"`
	// TimedOut is true on end when the exec's timeout killed it.
	TimedOut bool `json:"timed_out,omitempty"`
	// SessionRestarted is true on end when the command left its session's
	// shell dead or stuck and a fresh shell replaced it (cwd, variables and
	// functions are reset).
	SessionRestarted bool `json:"session_restarted,omitempty"`
	// Error is set on end when the stream failed; the command's real
	// status is then unknown, and ExitCode is absent.
	Error *Error `json:"error,omitempty"`
}

// FileInfo describes one file inside a sandbox.
type FileInfo struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Type       string    `json:"type"` // "file", "dir", "symlink", "other"
	Size       int64     `json:"size"`
	Mode       uint32    `json:"mode"`
	Owner      string    `json:"owner,omitempty"`
	Group      string    `json:"group,omitempty"`
	ModifiedAt time.Time `json:"modified_at"`
	// SymlinkTarget is, for a symlink, the absolute path it resolves to
	// (its own path when it does not resolve); Mode is then its target's.
	SymlinkTarget string `json:"symlink_target,omitempty"`
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
	// Imported and pulled images (imageimport.go): where the image came
	// from, how many layers it stacks, and its config.
	Source     string       `json:"source,omitempty"`
	LayerCount int          `json:"layer_count,omitempty"`
	Config     *ImageConfig `json:"config,omitempty"`
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
	// Format is KeyFormatPaddock (default, "pdk_" + hex) or KeyFormatE2B
	// ("e2b_" + hex, what E2B's SDKs expect in E2B_API_KEY). Both work on
	// every route.
	Format string `json:"format,omitempty"`
	// Scope is KeyScopeOwn (default: the key sees only what it created)
	// or KeyScopeAll (everything on the daemon). A key with scope own may
	// create only keys of scope own.
	Scope string `json:"scope,omitempty"`
}

// API key scopes: what a key's requests see and act on.
const (
	// KeyScopeOwn sees sandboxes, snapshots, backups, secrets and
	// ledgers the key created, and shared resources (images, templates,
	// pools, the policy); anything else does not exist for it.
	KeyScopeOwn = "own"
	// KeyScopeAll sees everything, as the unix socket's caller does.
	KeyScopeAll = "all"
)

// API key formats.
const (
	KeyFormatPaddock = "paddock"
	KeyFormatE2B     = "e2b"
)

// Key is an API key's public record; its secret is stored only hashed.
type Key struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	// Scope is KeyScopeOwn or KeyScopeAll.
	Scope string `json:"scope"`
	// CreatedBy is the id of the API key that created this one, or
	// CallerLocal for the unix socket; empty for keys made before it was
	// recorded.
	CreatedBy string    `json:"created_by,omitempty"`
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
	// DefaultImage is what a create that names no image gets.
	DefaultImage string `json:"default_image"`
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

// Event is one line of GET /v1/events, an NDJSON stream that stays open:
// first a "sync" (Sandboxes: every sandbox the caller may see, present
// even when empty), then a "sandbox" line for each change of one of them
// (Sandbox as it is now; From, To and Reason when its state changed; a
// sandbox whose state is "destroyed" is gone), a "ping" every
// StreamPingInterval, with ?usage=true a "usage" line every
// UsageInterval, and "lagged" as the last line when the client read too
// slowly to keep up: reconnect, and the new sync is the whole truth.
type Event struct {
	Type      string    `json:"type"`
	Sandboxes []Sandbox `json:"sandboxes,omitempty"`
	Sandbox   *Sandbox  `json:"sandbox,omitempty"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	// Usage is set on a "usage" event (GET /v1/events?usage=true).
	Usage []SandboxUsage `json:"usage,omitempty"`
	At    time.Time      `json:"at"`
}

// Event types (Event.Type).
const (
	StreamSync    = "sync"
	StreamSandbox = "sandbox"
	StreamPing    = "ping"
	StreamLagged  = "lagged"
)

// StreamPingInterval is how often an idle event stream says it is alive.
const StreamPingInterval = 15 * time.Second

// HostStats is the body of GET /v1/stats: what the daemon saw in each of
// the last StatsMinutes minutes, oldest first, for charts. It is kept in
// memory: a restarted daemon starts an empty hour.
type HostStats struct {
	Minutes []StatsMinute `json:"minutes"`
	// States counts the sandboxes by state now.
	States map[string]int `json:"states"`
}

// StatsMinute is one minute of HostStats.
type StatsMinute struct {
	Start time.Time `json:"start"`
	// Creates counts the creates that finished in the minute (served from
	// a pool or not); CreateErrors those of them that failed.
	Creates      int `json:"creates"`
	CreateErrors int `json:"create_errors"`
	// CreateP50Ms and CreateP95Ms bound the successful creates' latency
	// from above, to the histogram bucket it fell in (0: no create).
	CreateP50Ms int64 `json:"create_p50_ms"`
	CreateP95Ms int64 `json:"create_p95_ms"`
	// PoolServed and PoolCold count the creates that asked a warm pool
	// and got a ready sandbox, or found it empty.
	PoolServed int `json:"pool_served"`
	PoolCold   int `json:"pool_cold"`
	// States counts the sandboxes by state at the minute's last sample
	// (nil when the daemon took none in it).
	States map[string]int `json:"states,omitempty"`
}

// StatsMinutes is how many minutes GET /v1/stats covers.
const StatsMinutes = 60

// SandboxUsage is one sandbox's resource use in a "usage" event of
// GET /v1/events?usage=true.
type SandboxUsage struct {
	ID string `json:"id"`
	// CPUPercent is the CPU used since the previous sample, in percent of
	// one CPU (200 is two CPUs busy); absent on a sandbox's first sample.
	CPUPercent       *float64 `json:"cpu_percent,omitempty"`
	MemoryBytes      uint64   `json:"memory_bytes"`
	MemoryLimitBytes uint64   `json:"memory_limit_bytes,omitempty"`
	DiskUsedBytes    uint64   `json:"disk_used_bytes,omitempty"`
	DiskTotalBytes   uint64   `json:"disk_total_bytes,omitempty"`
}

// StreamUsage is the type of an event carrying Usage: the running and
// paused sandboxes the caller may see, sampled every UsageInterval while
// a stream asks for it.
const StreamUsage = "usage"

// UsageInterval is how often the daemon samples usage for event streams.
const UsageInterval = 10 * time.Second
