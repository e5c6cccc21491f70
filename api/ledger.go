package api

import "time"

// Ledger entry kinds the daemon records itself. Callers add their own
// kinds (lowercase letters, digits, '_', '.', '-') for side effects
// outside the sandbox; those entries carry source "caller".
const (
	LedgerCreate = "create"
	LedgerStart  = "start"
	LedgerStop   = "stop"
	LedgerPause  = "pause"
	LedgerResume = "resume"
	// LedgerHibernate: memory and processes written to disk, compute
	// freed; the restore is a "resume".
	LedgerHibernate     = "hibernate"
	LedgerDestroy       = "destroy"
	LedgerError         = "error"
	LedgerExec          = "exec"
	LedgerFileWrite     = "file_write"
	LedgerFileRemove    = "file_remove"
	LedgerFileMove      = "file_move"
	LedgerMkdir         = "mkdir"
	LedgerTarUpload     = "tar_upload"
	LedgerSnapshot      = "snapshot"
	LedgerRestore       = "restore"
	LedgerBackup        = "backup"
	LedgerBackupRestore = "backup_restore"
	// LedgerNetworkRules: an egress sandbox's allow/deny rules changed.
	LedgerNetworkRules = "network_rules"
	// LedgerNetworkGrant: hosts allowed for the length of one command.
	LedgerNetworkGrant = "network_grant"
)

// PaddockLedgerKinds returns every kind the daemon records, the one list
// both the recording code and the refusal of callers' entries use: the
// daemon records no kind outside it, and a caller may add none inside it,
// so an entry of one of these kinds is always the daemon's own. A new kind
// is added here.
func PaddockLedgerKinds() []string {
	return []string{
		LedgerCreate, LedgerStart, LedgerStop, LedgerPause, LedgerResume, LedgerHibernate, LedgerDestroy, LedgerError,
		LedgerExec, LedgerFileWrite, LedgerFileRemove, LedgerFileMove, LedgerMkdir, LedgerTarUpload,
		LedgerSnapshot, LedgerRestore, LedgerBackup, LedgerBackupRestore,
		LedgerEgressRefused, LedgerNetworkInject, LedgerNetworkRules, LedgerNetworkGrant,
		LedgerProcessStart, LedgerProcessEnd, LedgerCodeRun, LedgerTerminalOpen, LedgerTerminalEnd, LedgerKillAll,
	}
}

// IdempotencyKeyHeader names the header that makes a mutating call safe to
// retry: the daemon runs the call once and answers every retry with the
// first response. IdempotentReplayHeader is "true" on such a replay.
const (
	IdempotencyKeyHeader   = "Idempotency-Key"
	IdempotentReplayHeader = "Idempotent-Replayed"
)

// LedgerEntry is one record of what was done to a sandbox. Fields that do
// not apply to the kind are absent.
type LedgerEntry struct {
	Seq       int64  `json:"seq"`
	SandboxID string `json:"sandbox_id"`
	Kind      string `json:"kind"`
	// Source is "paddock" for what the daemon recorded, "caller" for
	// entries added through POST .../ledger.
	Source     string            `json:"source"`
	At         time.Time         `json:"at"`
	Command    []string          `json:"command,omitempty"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	DurationMS int64             `json:"duration_ms,omitempty"`
	Path       string            `json:"path,omitempty"`
	Note       string            `json:"note,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
}

// Ledger is the body of GET /v1/sandboxes/{id}/ledger: entries oldest
// first. When Next is set there are more; ask again with ?after=Next.
type Ledger struct {
	SandboxID string        `json:"sandbox_id"`
	Entries   []LedgerEntry `json:"entries"`
	Next      int64         `json:"next,omitempty"`
}

// AddLedgerEntryRequest is the body of POST /v1/sandboxes/{id}/ledger.
type AddLedgerEntryRequest struct {
	Kind string            `json:"kind"`
	Note string            `json:"note,omitempty"`
	Data map[string]string `json:"data,omitempty"`
}

// CreateBackupRequest is the body of POST /v1/sandboxes/{id}/backups.
type CreateBackupRequest struct {
	// Path is the directory to archive, relative paths from User's home.
	Path string `json:"path"`
	// Exclude holds glob patterns (path.Match syntax): a pattern without a
	// '/' drops every entry with a matching name, at any depth, and what is
	// under it; one with a '/' matches paths relative to Path.
	Exclude []string `json:"exclude,omitempty"`
	// TTL is a Go duration, or "never"; "" takes the daemon's default.
	TTL string `json:"ttl,omitempty"`
	// User reads the directory: "user" (default) or "root".
	User string `json:"user,omitempty"`
	// Store is where the archive goes: "local" (default) or "s3" (the
	// daemon's configured S3-compatible bucket).
	Store string `json:"store,omitempty"`
}

// Backup is one directory archive.
type Backup struct {
	ID          string   `json:"id"`
	SandboxID   string   `json:"sandbox_id"`
	SandboxName string   `json:"sandbox_name,omitempty"`
	Path        string   `json:"path"`
	Exclude     []string `json:"exclude,omitempty"`
	SizeBytes   int64    `json:"size_bytes"`
	// SHA256 is the hex digest of the stored archive, checked on restore.
	SHA256 string `json:"sha256"`
	// Storage is where the archive lives: "local" (the daemon's state dir)
	// or "s3".
	Storage string `json:"storage"`
	// Location is the object's "s3://bucket/key" for Storage "s3".
	Location  string     `json:"location,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// CreatedBy owns the backup: the API key id of the caller that made
	// it, CallerLocal for the unix socket, absent for older backups.
	CreatedBy string `json:"created_by,omitempty"`
}

// BackupList is the body of GET /v1/backups.
type BackupList struct {
	Backups []Backup `json:"backups"`
}

// RestoreBackupRequest is the body of POST /v1/backups/{backup}/restore.
type RestoreBackupRequest struct {
	// Sandbox is the target's id or name.
	Sandbox string `json:"sandbox"`
	// Path is where the directory's content goes; "" = the backed-up path.
	Path string `json:"path,omitempty"`
	// User owns the restored files: "user" (default) or "root".
	User string `json:"user,omitempty"`
}
