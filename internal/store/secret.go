package store

import (
	"context"
	"time"
)

// Secret is a stored secret: its value only ever sealed.
type Secret struct {
	Name   string
	Sealed []byte // nonce and AES-GCM ciphertext, sealed by the daemon
	// Owner is the caller that keeps it: an API key id, "local" for the
	// unix socket, "" for secrets older than owners. Names are unique per
	// owner: two owners may each keep a secret of one name.
	Owner     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SecretStore keeps sealed secrets, each addressed by its owner and name;
// no method finds a secret by name alone, so nothing of one owner's is
// reached through another owner's name. Errors wrap errdefs sentinels:
// ErrNotFound for a missing secret, ErrInvalidArgument for a bad record.
type SecretStore interface {
	// PutSecret creates s or replaces the value of s.Owner's secret of
	// that name; it reports whether it was created. CreatedAt is kept on
	// replace (and written back to s); UpdatedAt becomes now.
	PutSecret(ctx context.Context, s *Secret) (created bool, err error)
	// GetSecret finds owner's secret of that name.
	GetSecret(ctx context.Context, owner, name string) (*Secret, error)
	// ListSecrets lists every owner's secrets by name, then owner.
	ListSecrets(ctx context.Context) ([]*Secret, error)
	// DeleteSecret removes owner's secret of that name.
	DeleteSecret(ctx context.Context, owner, name string) error
}
