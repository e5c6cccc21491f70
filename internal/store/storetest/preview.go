package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/store"
)

func testPreviews(t *testing.T, s store.Store) {
	ctx := context.Background()
	sb := minimal("sb-prev", "")
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	h1, h2 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	put := func(port int, h [32]byte) error {
		return s.PutPreview(ctx, &store.Preview{SandboxID: sb.ID, Port: port, TokenHash: h[:]})
	}
	if err := put(8000, h1); err != nil {
		t.Fatal(err)
	}
	if err := put(3000, h1); err != nil {
		t.Fatal(err)
	}
	// Exposing again replaces the token: the old one stops working.
	if err := put(8000, h2); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPreview(ctx, sb.ID, 8000)
	if err != nil || !bytes.Equal(got.TokenHash, h2[:]) || got.CreatedAt.IsZero() {
		t.Fatalf("GetPreview = %+v, %v; want the second hash", got, err)
	}
	list, err := s.ListPreviews(ctx, sb.ID)
	if err != nil || len(list) != 2 || list[0].Port != 3000 || list[1].Port != 8000 {
		t.Fatalf("ListPreviews = %+v, %v", list, err)
	}
	if err := s.DeletePreview(ctx, sb.ID, 8000); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		err  error
		want error
	}{
		{"get revoked", func() error { _, err := s.GetPreview(ctx, sb.ID, 8000); return err }(), errdefs.ErrNotFound},
		{"delete twice", s.DeletePreview(ctx, sb.ID, 8000), errdefs.ErrNotFound},
		{"port zero", put(0, h1), errdefs.ErrInvalidArgument},
		{"port too big", put(65536, h1), errdefs.ErrInvalidArgument},
		{"short hash", s.PutPreview(ctx, &store.Preview{SandboxID: sb.ID, Port: 1, TokenHash: []byte("x")}), errdefs.ErrInvalidArgument},
		{"unknown sandbox", s.PutPreview(ctx, &store.Preview{SandboxID: "sb-none", Port: 1, TokenHash: h1[:]}), errdefs.ErrNotFound},
	}
	for _, tc := range bad {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	// Deleting the sandbox takes its previews with it.
	if err := s.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPreview(ctx, sb.ID, 3000); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("preview outlived its sandbox: %v", err)
	}
}
