package store

import (
	"context"
	"time"
)

// Secret is a stored secret: its value only ever sealed.
type Secret struct {
	Name   string
	Sealed []byte // nonce and AES-GCM ciphertext, sealed by the daemon
	// Owner is the caller that first set it: an API key id, "local" for
	// the unix socket, "" for secrets older than owners. Replacing the
	// value never changes it.
	Owner     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SecretStore keeps sealed secrets. Errors wrap errdefs sentinels:
// ErrNotFound for a missing secret, ErrInvalidArgument for a bad record.
type SecretStore interface {
	// PutSecret creates s (owned by s.Owner) or replaces the value of the
	// secret of that name; it reports whether it was created. A secret
	// owned by another than s.Owner is replaced only with anyOwner, and
	// keeps its owner (written back to s.Owner); without anyOwner that is
	// ErrConflict, and nothing changes. CreatedAt is kept on replace;
	// UpdatedAt becomes now.
	PutSecret(ctx context.Context, s *Secret, anyOwner bool) (created bool, err error)
	// GetSecret finds one secret.
	GetSecret(ctx context.Context, name string) (*Secret, error)
	// ListSecrets lists every secret by name.
	ListSecrets(ctx context.Context) ([]*Secret, error)
	// DeleteSecret removes one secret.
	DeleteSecret(ctx context.Context, name string) error
}
