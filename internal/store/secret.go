package store

import (
	"context"
	"time"
)

// Secret is a stored secret: its value only ever sealed.
type Secret struct {
	Name      string
	Sealed    []byte // nonce and AES-GCM ciphertext, sealed by the daemon
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SecretStore keeps sealed secrets. Errors wrap errdefs sentinels:
// ErrNotFound for a missing secret, ErrInvalidArgument for a bad record.
type SecretStore interface {
	// PutSecret creates or replaces s; it reports whether it was created.
	// CreatedAt is kept on replace; UpdatedAt becomes now.
	PutSecret(ctx context.Context, s *Secret) (created bool, err error)
	// GetSecret finds one secret.
	GetSecret(ctx context.Context, name string) (*Secret, error)
	// ListSecrets lists every secret by name.
	ListSecrets(ctx context.Context) ([]*Secret, error)
	// DeleteSecret removes one secret.
	DeleteSecret(ctx context.Context, name string) error
}
