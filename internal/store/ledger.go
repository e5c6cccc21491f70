package store

import (
	"context"
	"time"
)

// Ledger entry sources: what the daemon recorded itself, and what a caller
// added for a side effect outside the sandbox.
const (
	SourcePaddock = "paddock"
	SourceCaller  = "caller"
)

// LedgerEntry is one append-only record of what was done to a sandbox.
// Optional fields are zero when they do not apply to the kind.
type LedgerEntry struct {
	Seq         int64 // assigned by the store, increasing
	SandboxID   string
	SandboxName string // the name when recorded, so a ledger is found by name after a destroy
	Kind        string
	Source      string // SourcePaddock or SourceCaller
	At          time.Time
	Command     []string
	ExitCode    *int
	Duration    time.Duration
	Path        string
	Note        string
	Data        map[string]string
}

// LedgerStore keeps ledgers. Entries are never changed once appended; a
// ledger goes away only as a whole, through PurgeLedgers.
type LedgerStore interface {
	// AppendLedger stores e, setting its Seq (and At, when zero).
	AppendLedger(ctx context.Context, e *LedgerEntry) error
	// Ledger lists a sandbox's entries with Seq > after, oldest first, at
	// most limit of them. An unknown sandbox has an empty ledger.
	Ledger(ctx context.Context, sandboxID string, after int64, limit int) ([]LedgerEntry, error)
	// LedgerSandboxes returns the ids of the sandboxes whose ledger ref
	// may name: ref itself when a ledger has that id, then the sandboxes
	// whose entries recorded ref as their name, newest first, at most
	// MaxLedgerNameMatches of them (names are per owner, so several owners'
	// sandboxes may have used one). ErrNotFound when no ledger matches.
	LedgerSandboxes(ctx context.Context, ref string) ([]string, error)
	// PurgeLedgers deletes the ledgers of sandboxes that are destroyed (or
	// whose record is gone) and whose newest entry is older than before.
	// Ledgers of sandboxes that still exist are kept whatever their age.
	PurgeLedgers(ctx context.Context, before time.Time) (int64, error)
}

// Idempotency record states.
const (
	IdemInProgress = "in_progress"
	IdemDone       = "done"
	IdemAborted    = "aborted"   // the response broke off mid-way; the outcome is unknown
	IdemTooLarge   = "too_large" // it completed, but its response was too large to keep
)

// IdempotencyRecord is the remembered outcome of one API call made with an
// Idempotency-Key.
type IdempotencyRecord struct {
	Key         string // the caller's key qualified by its credential, hashed
	Fingerprint string // hash of method, path, query and body
	Method      string
	Path        string
	State       string
	Owner       string // the daemon run that executes it, to spot calls cut by a restart
	Status      int
	ContentType string
	Body        []byte
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// IdempotencyStore remembers API call outcomes by key.
type IdempotencyStore interface {
	// BeginIdempotent stores r (State in progress) unless a record with
	// r.Key exists that has not expired at r.CreatedAt; then it returns
	// that record and false. An expired record is replaced.
	BeginIdempotent(ctx context.Context, r *IdempotencyRecord) (existing *IdempotencyRecord, created bool, err error)
	// FinishIdempotent stores the outcome (state, status, content type,
	// body) of the record with r.Key.
	FinishIdempotent(ctx context.Context, r *IdempotencyRecord) error
	// ForgetIdempotent deletes the record with key, so the key may be used
	// again at once. A missing record is not an error.
	ForgetIdempotent(ctx context.Context, key string) error
	// PurgeIdempotency deletes records that expired before t.
	PurgeIdempotency(ctx context.Context, t time.Time) (int64, error)
}

// Backup is the record of one directory archive. The archive's bytes live
// in a blob store; this is what is known about them.
type Backup struct {
	ID          string
	SandboxID   string
	SandboxName string
	Path        string
	Excludes    []string
	SizeBytes   int64
	SHA256      string // hex digest of the stored archive
	Storage     string // "local"
	CreatedAt   time.Time
	ExpiresAt   time.Time // zero: never
	// Owner is the caller that made the backup: an API key id, "local"
	// for the unix socket, "" for backups older than owners.
	Owner string
}

// BackupStore keeps backup records.
type BackupStore interface {
	CreateBackup(ctx context.Context, b *Backup) error
	// GetBackup returns a backup by id, expired or not; ErrNotFound.
	GetBackup(ctx context.Context, id string) (*Backup, error)
	// ListBackups lists backups, oldest first; sandboxID "" lists all.
	ListBackups(ctx context.Context, sandboxID string) ([]*Backup, error)
	// DeleteBackup removes the record; ErrNotFound if absent.
	DeleteBackup(ctx context.Context, id string) error
	// ExpiredBackups lists backups whose ExpiresAt is set and not after t.
	ExpiredBackups(ctx context.Context, t time.Time) ([]*Backup, error)
}

// MaxLedgerNameMatches bounds how many sandboxes LedgerSandboxes returns
// for one name.
const MaxLedgerNameMatches = 100
