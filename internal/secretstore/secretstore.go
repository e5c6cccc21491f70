// Package secretstore keeps the daemon's secrets: values sealed with
// AES-256-GCM under a key file beside the database, each addressed by its
// owner and name. Only the egress proxy reads values back (RevealFor).
package secretstore

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

// KeyFile, in the state dir, holds the AES-256 key secrets are sealed
// with. It lives beside the database, not in it, so a copied database
// reveals nothing.
const KeyFile = "secrets.key"

// Box seals secrets into the store and opens them for the egress proxy,
// which is the only reader of values. Every secret is addressed by its
// owner and name.
type Box struct {
	st        store.SecretStore
	sandboxes SandboxReader // whose secrets a sandbox's rules name
	keyPath   string

	once sync.Once
	aead cipher.AEAD
	err  error
}

var _ controller.Secrets = (*Box)(nil)

// SandboxReader finds a sandbox's record, for its owner.
type SandboxReader interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
}

// Options configure a Box.
type Options struct {
	// StateDir holds the key file (KeyFile), created 0600 on first use.
	StateDir string
	// Store keeps the sealed values.
	Store store.SecretStore
	// Sandboxes name each sandbox's owner for RevealFor; nil, RevealFor
	// refuses every lookup.
	Sandboxes SandboxReader
}

// New returns a Box; the key is loaded (or created) on first use.
func New(o Options) *Box {
	return &Box{st: o.Store, sandboxes: o.Sandboxes, keyPath: filepath.Join(o.StateDir, KeyFile)}
}

// cipher loads the key, creating it 0600 on first use.
func (s *Box) cipher() (cipher.AEAD, error) {
	s.once.Do(func() {
		key, err := loadOrCreateKey(s.keyPath)
		if err != nil {
			s.err = fmt.Errorf("secrets key: %w", err)
			return
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			s.err = err
			return
		}
		s.aead, s.err = cipher.NewGCM(block)
	})
	return s.aead, s.err
}

func loadOrCreateKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil {
		if len(key) != 32 {
			return nil, fmt.Errorf("%s holds %d bytes, want 32", path, len(key))
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return key, nil
}

// seal encrypts value with the name as associated data, so a sealed value
// moved to another name does not open.
func (s *Box) seal(name string, value []byte) ([]byte, error) {
	aead, err := s.cipher()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, value, []byte("paddock-secret:"+name)), nil
}

func (s *Box) open(name string, sealed []byte) ([]byte, error) {
	aead, err := s.cipher()
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("secret %q: sealed value too short", name)
	}
	n := aead.NonceSize()
	v, err := aead.Open(nil, sealed[:n], sealed[n:], []byte("paddock-secret:"+name))
	if err != nil {
		// Wrong key file or tampered row: say so, never what it held.
		return nil, fmt.Errorf("secret %q cannot be decrypted with this daemon's key: %w", name, errdefs.ErrFailedPrecondition)
	}
	return v, nil
}

func toAPISecret(r *store.Secret) api.Secret {
	return api.Secret{Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, CreatedBy: r.Owner}
}

func (s *Box) Set(ctx context.Context, owner, name string, value []byte) (api.Secret, bool, error) {
	sealed, err := s.seal(name, value)
	if err != nil {
		return api.Secret{}, false, err
	}
	rec := &store.Secret{Name: name, Sealed: sealed, Owner: owner}
	created, err := s.st.PutSecret(ctx, rec)
	if err != nil {
		return api.Secret{}, false, err
	}
	return toAPISecret(rec), created, nil
}

func (s *Box) Get(ctx context.Context, owner, name string) (api.Secret, error) {
	r, err := s.st.GetSecret(ctx, owner, name)
	if err != nil {
		return api.Secret{}, err
	}
	return toAPISecret(r), nil
}

func (s *Box) List(ctx context.Context) ([]api.Secret, error) {
	recs, err := s.st.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Secret, 0, len(recs))
	for _, r := range recs {
		out = append(out, toAPISecret(r))
	}
	return out, nil
}

func (s *Box) Delete(ctx context.Context, owner, name string) error {
	return s.st.DeleteSecret(ctx, owner, name)
}

// Reveal returns owner's secret's value: for the egress proxy only.
func (s *Box) Reveal(ctx context.Context, owner, name string) (string, error) {
	r, err := s.st.GetSecret(ctx, owner, name)
	if err != nil {
		return "", err
	}
	v, err := s.open(name, r.Sealed)
	if err != nil {
		return "", err
	}
	return string(v), nil
}

// RevealFor is the egress proxy's lookup for an injection rule of the
// sandbox id: the value of the secret of that name that the sandbox's
// owner keeps, never another owner's of the same name. The owner is read
// from the sandbox's record on each use, so nothing cached can point a
// rule at another owner.
func (s *Box) RevealFor(sandboxID, name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.sandboxes == nil {
		return "", fmt.Errorf("secret %q: no sandbox records to find sandbox %s's owner: %w", name, sandboxID, errdefs.ErrUnavailable)
	}
	rec, err := s.sandboxes.GetSandbox(ctx, sandboxID)
	if err != nil {
		return "", fmt.Errorf("owner of sandbox %s: %w", sandboxID, err)
	}
	if rec.State == api.StateDestroyed {
		return "", errdefs.NotFound("sandbox %s is destroyed", sandboxID)
	}
	return s.Reveal(ctx, rec.KeyID, name)
}
