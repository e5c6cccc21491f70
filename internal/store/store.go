// Package store persists the controller's records. Store is the interface;
// sqlite/ is the embedded implementation, storetest/ the shared suite every
// implementation must pass.
package store

import (
	"context"
	"time"

	"github.com/paddock-dev/paddock/api"
)

// Sandbox is the persisted record of one sandbox. The API view is derived
// from it; fields the user never sees (runtime-private) live here too.
type Sandbox struct {
	ID             string
	Name           string // unique among live sandboxes when non-empty
	State          string // api.State*
	ErrorReason    string
	Image          string
	ImageDigest    string
	Runtime        string
	Resources      api.Resources
	Env            map[string]string
	Labels         map[string]string
	SleepAfter     time.Duration
	KeepAlive      bool
	Timeout        time.Duration // hard lifetime; 0 = none
	CreatedAt      time.Time
	UpdatedAt      time.Time
	LastActivityAt time.Time
	// SnapshotID is the snapshot the sandbox was restored from ("" if none).
	SnapshotID string
	// SnapshotLayers are layer digests stacked on the image, lowest first.
	SnapshotLayers []string
	// OnIdle is what idling does: "stop" (or ""), "pause" or "snapshot".
	OnIdle string
	// KeyID is the caller that created the sandbox: an API key id, or
	// "local" for the unix socket ("" for sandboxes older than the field).
	KeyID string
}

// Key is a stored API key; only the hash of its secret is kept.
type Key struct {
	ID         string
	Name       string
	Prefix     string // first characters of the secret, for display
	SecretHash []byte // sha256 of the secret
	// Scope is api.KeyScopeOwn or api.KeyScopeAll; "" is stored as own.
	Scope string
	// CreatedBy is the caller that created the key: an API key id, or
	// api.CallerLocal for the unix socket; "" for keys older than the
	// record (migration 0011). A key of scope own manages only the keys
	// it created.
	CreatedBy string
	CreatedAt time.Time
}

// StateChange is one lifecycle transition of a sandbox, kept so an operator
// can see how a sandbox reached its current state. From is empty for the
// first state a sandbox enters.
type StateChange struct {
	SandboxID string
	From      string
	To        string
	Reason    string
	At        time.Time
}

// Store is the controller's persistence. Errors wrap errdefs sentinels:
// ErrNotFound for a missing id, ErrConflict for a duplicate id or name,
// ErrInvalidArgument for a record that fails validation.
type Store interface {
	CreateSandbox(ctx context.Context, s *Sandbox) error
	GetSandbox(ctx context.Context, id string) (*Sandbox, error)
	// SandboxesByName lists the sandboxes that are not destroyed named
	// name, oldest first, none being an empty list. Names are unique per
	// owner (KeyID): two owners may each hold one.
	SandboxesByName(ctx context.Context, name string) ([]*Sandbox, error)
	// ListSandboxes returns sandboxes not destroyed, oldest first, whose
	// labels include every pair in labels (nil = all).
	ListSandboxes(ctx context.Context, labels map[string]string) ([]*Sandbox, error)
	// UpdateSandbox replaces the record with the same id (UpdatedAt is set by the store).
	UpdateSandbox(ctx context.Context, s *Sandbox) error
	// DeleteSandbox removes the record; ErrNotFound if absent.
	DeleteSandbox(ctx context.Context, id string) error

	CreateKey(ctx context.Context, k *Key) error
	ListKeys(ctx context.Context) ([]*Key, error)
	// KeyByHash finds the key whose SecretHash equals hash.
	KeyByHash(ctx context.Context, hash []byte) (*Key, error)
	// GetKey finds a key by id.
	GetKey(ctx context.Context, id string) (*Key, error)
	DeleteKey(ctx context.Context, id string) error

	// AppendStateChange records one transition; At defaults to now.
	// ErrNotFound if the sandbox is absent.
	AppendStateChange(ctx context.Context, c StateChange) error
	// StateHistory lists a sandbox's transitions, oldest first; ErrNotFound
	// if the sandbox is absent. Deleting a sandbox deletes its history.
	StateHistory(ctx context.Context, sandboxID string) ([]StateChange, error)

	// Ledgers, Idempotency-Key results and backup records (ledger.go).
	LedgerStore
	IdempotencyStore
	BackupStore

	// Exposed ports and their hashed preview tokens (preview.go).
	PreviewStore

	// Filesystem snapshots (snapshot.go).
	SnapshotStore

	// Templates, their build cache and warm pools (template.go).
	TemplateStore

	Close() error
}
