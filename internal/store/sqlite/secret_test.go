package sqlite

import (
	"bytes"
	"errors"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func TestSecrets(t *testing.T) {
	st, _ := openTemp(t)
	ctx := t.Context()
	sealed := bytes.Repeat([]byte{7}, 40)
	s := &store.Secret{Name: "gh-token", Sealed: sealed}
	created, err := st.PutSecret(ctx, s)
	if err != nil || !created || s.CreatedAt.IsZero() {
		t.Fatalf("create: %v %v %+v", created, err, s)
	}
	first := s.CreatedAt
	s2 := &store.Secret{Name: "gh-token", Sealed: bytes.Repeat([]byte{8}, 40)}
	if created, err := st.PutSecret(ctx, s2); err != nil || created {
		t.Fatalf("replace: %v %v", created, err)
	}
	got, err := st.GetSecret(ctx, "gh-token")
	if err != nil || !bytes.Equal(got.Sealed, s2.Sealed) || !got.CreatedAt.Equal(first) || got.UpdatedAt.Before(first) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := st.PutSecret(ctx, &store.Secret{Name: "b", Sealed: sealed}); err != nil {
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
		if _, err := st.PutSecret(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("PutSecret(%q, %d bytes) = %v", bad.Name, len(bad.Sealed), err)
		}
	}
}
