package daemon

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

// secretKeyFile holds the AES-256 key secrets are sealed with. It lives
// beside the database, not in it, so a copied database reveals nothing.
const secretKeyFile = "secrets.key"

// secretBox seals secrets into the store and opens them for the egress
// proxy, which is the only reader of values.
type secretBox struct {
	st      store.SecretStore
	keyPath string

	once sync.Once
	aead cipher.AEAD
	err  error
}

var _ controller.Secrets = (*secretBox)(nil)

func newSecretBox(stateDir string, st store.SecretStore) *secretBox {
	return &secretBox{st: st, keyPath: filepath.Join(stateDir, secretKeyFile)}
}

// cipher loads the key, creating it 0600 on first use.
func (s *secretBox) cipher() (cipher.AEAD, error) {
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
func (s *secretBox) seal(name string, value []byte) ([]byte, error) {
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

func (s *secretBox) open(name string, sealed []byte) ([]byte, error) {
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

func (s *secretBox) Set(ctx context.Context, name, owner string, anyOwner bool, value []byte) (api.Secret, bool, error) {
	sealed, err := s.seal(name, value)
	if err != nil {
		return api.Secret{}, false, err
	}
	rec := &store.Secret{Name: name, Sealed: sealed, Owner: owner}
	created, err := s.st.PutSecret(ctx, rec, anyOwner)
	if err != nil {
		return api.Secret{}, false, err
	}
	if !created {
		if got, err := s.st.GetSecret(ctx, name); err == nil {
			rec.CreatedAt = got.CreatedAt
		}
	}
	return toAPISecret(rec), created, nil
}

func (s *secretBox) List(ctx context.Context) ([]api.Secret, error) {
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

func (s *secretBox) Delete(ctx context.Context, name string) error {
	return s.st.DeleteSecret(ctx, name)
}

func (s *secretBox) Owner(ctx context.Context, name string) (string, bool, error) {
	r, err := s.st.GetSecret(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return r.Owner, true, nil
}

// Exists reports whether a secret is stored, whoever owns it.
func (s *secretBox) Exists(ctx context.Context, name string) (bool, error) {
	_, err := s.st.GetSecret(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Reveal returns a secret's value: for the egress proxy only.
func (s *secretBox) Reveal(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := s.st.GetSecret(ctx, name)
	if err != nil {
		return "", err
	}
	v, err := s.open(name, r.Sealed)
	if err != nil {
		return "", err
	}
	return string(v), nil
}
