package sqlite

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestSecrets(t *testing.T) {
	st, _ := openTemp(t)
	ctx := t.Context()
	sealed := bytes.Repeat([]byte{7}, 40)
	s := &store.Secret{Name: "gh-token", Sealed: sealed}
	created, err := st.PutSecret(ctx, s, false)
	if err != nil || !created || s.CreatedAt.IsZero() {
		t.Fatalf("create: %v %v %+v", created, err, s)
	}
	first := s.CreatedAt
	s2 := &store.Secret{Name: "gh-token", Sealed: bytes.Repeat([]byte{8}, 40)}
	if created, err := st.PutSecret(ctx, s2, false); err != nil || created {
		t.Fatalf("replace: %v %v", created, err)
	}
	got, err := st.GetSecret(ctx, "gh-token")
	if err != nil || !bytes.Equal(got.Sealed, s2.Sealed) || !got.CreatedAt.Equal(first) || got.UpdatedAt.Before(first) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := st.PutSecret(ctx, &store.Secret{Name: "b", Sealed: sealed}, false); err != nil {
		t.Fatal(err)
	}
	list, err := st.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "b" || list[1].Name != "gh-token" {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := st.DeleteSecret(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSecret(ctx, "b"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.GetSecret(ctx, "b"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	for _, bad := range []*store.Secret{
		{Name: "Bad", Sealed: sealed},
		{Name: "", Sealed: sealed},
		{Name: "ok", Sealed: []byte{1, 2}},
		{Name: "ok", Sealed: make([]byte, 70001)},
	} {
		if _, err := st.PutSecret(ctx, bad, false); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("PutSecret(%q, %d bytes) = %v", bad.Name, len(bad.Sealed), err)
		}
	}
}

// TestSecretOwners: a secret keeps the owner that created it; another
// owner's set is a conflict that changes nothing, unless it may replace
// any owner's, and then the owner stays.
func TestSecretOwners(t *testing.T) {
	st, _ := openTemp(t)
	ctx := t.Context()
	first := bytes.Repeat([]byte{1}, 40)
	if created, err := st.PutSecret(ctx, &store.Secret{Name: "tok", Sealed: first, Owner: "key-a"}, false); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	tests := []struct {
		name      string
		owner     string
		anyOwner  bool
		value     byte
		wantErr   error
		wantValue byte
	}{
		{"another owner is refused", "key-b", false, 9, errdefs.ErrConflict, 1},
		{"no owner is another owner", "", false, 9, errdefs.ErrConflict, 1},
		{"the owner replaces it", "key-a", false, 2, nil, 2},
		{"any owner replaces it and the owner stays", "local", true, 3, nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &store.Secret{Name: "tok", Sealed: bytes.Repeat([]byte{tt.value}, 40), Owner: tt.owner}
			created, err := st.PutSecret(ctx, s, tt.anyOwner)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) || created {
				t.Fatalf("PutSecret = %v, %v; want error %v, not created", created, err, tt.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "key-a") || !strings.Contains(err.Error(), "taken")) {
				t.Errorf("conflict %q must say the name is taken and nothing of its owner", err)
			}
			if err == nil && s.Owner != "key-a" {
				t.Errorf("owner written back %q, want key-a", s.Owner)
			}
			got, gerr := st.GetSecret(ctx, "tok")
			if gerr != nil {
				t.Fatal(gerr)
			}
			if got.Owner != "key-a" || got.Sealed[0] != tt.wantValue {
				t.Errorf("stored owner %q value %d, want key-a %d", got.Owner, got.Sealed[0], tt.wantValue)
			}
		})
	}
	list, err := st.ListSecrets(ctx)
	if err != nil || len(list) != 1 || list[0].Owner != "key-a" {
		t.Fatalf("list: %+v %v", list, err)
	}
}
