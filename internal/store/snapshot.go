package store

import (
	"context"
	"github.com/paddock-dev/paddock/api"
	"time"
)

// SnapshotLayer is one layer of a snapshot's chain.
type SnapshotLayer struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	// Added is the disk space the snapshot added to the local store by
	// storing this layer (0 for a layer that was stored already).
	Added int64 `json:"added,omitempty"`
}

// Snapshot is the record of one filesystem snapshot. Layers is the whole
// chain, lowest first (a snapshot of a restored sandbox holds its parent's
// layers and its own on top).
type Snapshot struct {
	ID          string
	Name        string // unique when non-empty
	SandboxID   string // the sandbox it was taken of ("" when imported)
	Image       string
	ImageDigest string
	Parent      string // the snapshot the sandbox was restored from, if any
	Layers      []SnapshotLayer
	Size        int64 // bytes of the snapshot's own (top) layer
	CreatedAt   time.Time
	// TTL is how long the snapshot lives after it is taken or restored;
	// zero: never. ExpiresAt is zero exactly when TTL is.
	TTL       time.Duration
	ExpiresAt time.Time
	// Owner is the caller the snapshot belongs to: an API key id, "local"
	// for the unix socket, "" for snapshots older than owners.
	Owner string
	// Memory is set when the snapshot keeps its sandbox's memory and
	// processes too.
	Memory *SnapshotMemory
}

// SnapshotMemory says what a snapshot's memory image needs to be
// restored: the runtime and its build, and the size the sandbox had
// (the image holds a kernel sized to it).
type SnapshotMemory struct {
	Runtime   string        `json:"runtime"`
	Format    string        `json:"format"`
	Bytes     int64         `json:"bytes"`
	Resources api.Resources `json:"resources"`
}

// SnapshotStore keeps snapshot records. Errors wrap errdefs sentinels:
// ErrNotFound for a missing id or name, ErrConflict for a duplicate id or
// name, ErrInvalidArgument for a record that fails validation.
type SnapshotStore interface {
	CreateSnapshot(ctx context.Context, s *Snapshot) error
	GetSnapshot(ctx context.Context, id string) (*Snapshot, error)
	// SnapshotsByName lists the snapshots named name, oldest first, none
	// being an empty list. Names are unique per Owner: two owners may each
	// hold one.
	SnapshotsByName(ctx context.Context, name string) ([]*Snapshot, error)
	// ListSnapshots lists all snapshots, oldest first.
	ListSnapshots(ctx context.Context) ([]*Snapshot, error)
	// SetSnapshotTTL sets a snapshot's TTL and its expiry together (both
	// zero: never).
	SetSnapshotTTL(ctx context.Context, id string, ttl time.Duration, expiresAt time.Time) error
	// RenewSnapshot moves the expiry of a snapshot that expires to
	// expiresAt, keeping its TTL; a snapshot that never expires is left
	// alone (not an error).
	RenewSnapshot(ctx context.Context, id string, expiresAt time.Time) error
	DeleteSnapshot(ctx context.Context, id string) error
}
