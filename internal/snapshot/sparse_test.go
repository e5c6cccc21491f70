package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
)

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// sparseFileOf is a snapshot file whose one layer entry is itself sparse:
// its data is head at offset 0, and the manifest states the digest and
// size of what archive/tar expands it to (head, then zeros).
func sparseFileOf(t *testing.T, head []byte, size int64) []byte {
	t.Helper()
	h := sha256.New()
	h.Write(head)
	if _, err := io.CopyN(h, zeroReader{}, size-int64(len(head))); err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	m := Manifest{Format: ArchiveFormat, ImageDigest: "sha256:" + strings.Repeat("a", 64), CreatedAt: time.Unix(1, 0).UTC(),
		Layers: []Layer{{Digest: digest, Size: size}}}
	mb, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: manifestName, Mode: 0o644, Size: int64(len(mb))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(mb)
	_ = tw.Flush()
	b.Write(tarsafetest.PAXSparseAt(layerEntry(digest), size, 0, head))
	b.Write(tarsafetest.End())
	return b.Bytes()
}

// TestImportRefusesSparseEntries: a snapshot file of a few KiB holding a
// 256 MiB sparse entry, in a layer or as the layer itself, is refused
// before the expanded bytes are written: the store's disk use stays small
// at every moment of the import, and nothing is kept.
func TestImportRefusesSparseEntries(t *testing.T) {
	requireRoot(t)
	const big = 256 << 20
	// The expanded layer: a canonical-looking header of a big file, whose
	// content is the hole.
	var head bytes.Buffer
	tw := tar.NewWriter(&head)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: big - 3*512, Format: tar.FormatPAX})
	_ = tw.Flush()
	layer := func(entry []byte) []byte { return append(bytes.Clone(entry), tarsafetest.End()...) }
	tests := []struct {
		name string
		data []byte
	}{
		{"pax sparse file in a layer", archiveOf(t, layer(tarsafetest.PAXSparse("big", big, []byte("x"))))},
		{"gnu sparse file in a layer", archiveOf(t, layer(tarsafetest.GNUSparse("big", big, []byte("x"))))},
		{"sparse layer entry", sparseFileOf(t, head.Bytes(), big)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			stop := tarsafetest.WatchUsage(s.Dir())
			_, err := s.Import(context.Background(), bytes.NewReader(tc.data), Limits{})
			peak := stop()
			t.Logf("file %d bytes, peak on disk %d bytes: %v", len(tc.data), peak, err)
			if !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), "sparse") {
				t.Fatalf("import = %v, want a sparse refusal", err)
			}
			if peak > 1<<20 {
				t.Fatalf("the import wrote %d bytes at its peak", peak)
			}
			if ls, _ := s.Layers(); len(ls) != 0 {
				t.Fatalf("layers kept: %v", ls)
			}
		})
	}
}

// TestImportBoundsBeforeWriting: an entry larger than its layer's
// declared size is refused before it is written, and the bound on file
// content covers all layers together.
func TestImportBoundsBeforeWriting(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	// A header claiming 1 GiB, with a few bytes behind it: the layer's
	// checksum and size are truthful, the entry cannot be.
	var lie bytes.Buffer
	tw := tar.NewWriter(&lie)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "huge", Mode: 0o644, Size: 1 << 30})
	_, _ = tw.Write([]byte("just a few bytes"))
	_ = tw.Flush()
	s := newStore(t)
	_, err := s.Import(ctx, bytes.NewReader(archiveOf(t, lie.Bytes())), Limits{})
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("an entry larger than its layer: %v", err)
	}

	reg := func(name string, n int) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(n)}
	}
	one := tarOf(t, reg("a", 600<<10))
	two := tarOf(t, reg("b", 600<<10))
	_, err = newStore(t).Import(ctx, bytes.NewReader(archiveOf(t, one, two)), Limits{MaxBytes: 1 << 20})
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("1.2 MiB over two layers with a 1 MiB bound: %v", err)
	}
	if _, err := newStore(t).Import(ctx, bytes.NewReader(archiveOf(t, one)), Limits{MaxBytes: 1 << 20}); err != nil {
		t.Fatalf("one layer within the bound: %v", err)
	}
}
