package secrets

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/secretstore"
	"github.com/paddock-dev/paddock/internal/store/sqlite"
)

// fakeCore reports the injection rules that use secrets (the real one
// reads them from the network's policies) and counts the holds.
type fakeCore struct {
	users map[controller.SecretRef][]string
	holds int
}

func (f *fakeCore) SecretUsers(ctx context.Context) (map[controller.SecretRef][]string, error) {
	out := map[controller.SecretRef][]string{}
	for k, v := range f.users {
		if controller.Visible(ctx, k.Owner) {
			out[k] = v
		}
	}
	return out, nil
}

func (f *fakeCore) HoldSecrets(fn func() error) error {
	f.holds++
	return fn()
}

const (
	keyA = "aaaaaaaaaaaaaaaa"
	keyB = "bbbbbbbbbbbbbbbb"
)

// newService is the subsystem over the real sealed store on SQLite.
func newService(t *testing.T) (*Service, *fakeCore) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "paddock.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	core := &fakeCore{users: map[controller.SecretRef][]string{}}
	return New(core, secretstore.New(secretstore.Options{StateDir: dir, Store: st, Sandboxes: st}), nil), core
}

// TestOwnersAndNames: names are per owner; a key of scope own sees and
// touches only its own, and another's is "does not exist" in the same
// words as a missing one; a caller of scope all names an owner; values
// never come back.
func TestOwnersAndNames(t *testing.T) {
	s, _ := newService(t)
	bg := context.Background()
	a := controller.WithCaller(bg, keyA, api.KeyScopeOwn)
	b := controller.WithCaller(bg, keyB, api.KeyScopeOwn)
	ops := controller.WithCaller(bg, "oooooooooooooooo", api.KeyScopeAll)

	sec, created, err := s.Set(a, "", "token", []byte("a-value-1"))
	if err != nil || !created || sec.CreatedBy != keyA {
		t.Fatalf("a sets token: %+v, %v, %v", sec, created, err)
	}
	if _, created, err := s.Set(b, "", "token", []byte("b-value-1")); err != nil || !created {
		t.Fatalf("b's own token beside a's: %v, %v", created, err)
	}
	if _, created, err := s.Set(a, "", "token", []byte("a-value-2")); err != nil || created {
		t.Fatalf("a replaces its token: %v, %v", created, err)
	}
	list, err := s.List(a)
	if err != nil || len(list) != 1 || list[0].CreatedBy != keyA {
		t.Fatalf("a lists %+v, %v", list, err)
	}
	if all, err := s.List(ops); err != nil || len(all) != 2 {
		t.Fatalf("a key of scope all lists %+v, %v", all, err)
	}
	none := s.Delete(b, "", "nosuch")
	for name, err := range map[string]error{
		"get":    func() error { _, err := s.Get(b, keyA, "nosuch"); return err }(),
		"set":    func() error { _, _, err := s.Set(b, keyA, "nosuch", []byte("x-value-1")); return err }(),
		"delete": s.Delete(b, keyA, "nosuch"),
	} {
		if !errors.Is(err, errdefs.ErrNotFound) || err.Error() != none.Error() {
			t.Errorf("%s of a's secret by b: %v, want %v", name, err, none)
		}
	}
	if got, err := s.Get(ops, keyA, "token"); err != nil || got.CreatedBy != keyA {
		t.Errorf("scope all reads a's: %+v, %v", got, err)
	}
	for _, sec := range append(list, api.Secret{}) {
		if strings.Contains(sec.Name+sec.CreatedBy, "value") {
			t.Errorf("a value came back: %+v", sec)
		}
	}
	if err := s.Delete(ops, keyA, "token"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(a, "", "token"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a's token after scope all deleted it: %v", err)
	}
	if _, err := s.Get(b, "", "token"); err != nil {
		t.Errorf("b's token went with a's: %v", err)
	}
	if _, err := s.Get(context.Background(), "", "token"); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("a context without a caller: %v", err)
	}
	if _, _, err := s.Set(a, "", "bad name!", []byte("v")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a bad name: %v", err)
	}
	if _, _, err := s.Set(a, "not-an-owner", "ok", []byte("value-1")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a malformed owner: %v", err)
	}
}

// TestInUse: a secret an injection rule names shows its users and cannot
// be deleted; the check and the delete run with the secrets held.
func TestInUse(t *testing.T) {
	s, core := newService(t)
	a := controller.WithCaller(context.Background(), keyA, api.KeyScopeOwn)
	if _, _, err := s.Set(a, "", "token", []byte("a-value-1")); err != nil {
		t.Fatal(err)
	}
	core.users[controller.SecretRef{Owner: keyA, Name: "token"}] = []string{"sb1"}
	if got, err := s.Get(a, "", "token"); err != nil || len(got.UsedBy) != 1 || got.UsedBy[0] != "sb1" {
		t.Errorf("get of a used secret: %+v, %v", got, err)
	}
	err := s.Delete(a, "", "token")
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "sb1") || core.holds != 1 {
		t.Fatalf("delete of a used secret: %v (holds %d)", err, core.holds)
	}
	delete(core.users, controller.SecretRef{Owner: keyA, Name: "token"})
	if err := s.Delete(a, "", "token"); err != nil {
		t.Fatal(err)
	}
}

// TestNoStore: a daemon without secrets says so.
func TestNoStore(t *testing.T) {
	s := New(&fakeCore{}, nil, nil)
	a := controller.WithCaller(context.Background(), keyA, api.KeyScopeOwn)
	if _, err := s.List(a); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("list without a store: %v", err)
	}
}
