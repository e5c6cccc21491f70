package tarsafe_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/paddock-dev/paddock/internal/tarsafe"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
)

// TestSparse checks that both sparse spellings the crafting helpers write
// are what archive/tar expands to gigabytes, and that Sparse sees them
// (and nothing else).
func TestSparse(t *testing.T) {
	const size = 2 << 30
	var plain bytes.Buffer
	tw := tar.NewWriter(&plain)
	_ = tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 1, Format: tar.FormatPAX, PAXRecords: map[string]string{"SCHILY.xattr.user.a": "b"}})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Flush()
	tests := []struct {
		name   string
		data   []byte
		sparse bool
		size   int64
	}{
		{"pax 1.0", tarsafetest.PAXSparse("big", size, []byte("x")), true, size},
		{"gnu S", tarsafetest.GNUSparse("big", size, []byte("x")), true, size},
		{"plain", plain.Bytes(), false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := append(append([]byte{}, tc.data...), tarsafetest.End()...)
			tr := tar.NewReader(bytes.NewReader(data))
			hdr, err := tr.Next()
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Size != tc.size {
				t.Fatalf("size %d, want %d (the crafted entry is not what archive/tar expands)", hdr.Size, tc.size)
			}
			if got := tarsafe.Sparse(hdr); got != tc.sparse {
				t.Fatalf("Sparse = %v, want %v (type %q, records %v)", got, tc.sparse, hdr.Typeflag, hdr.PAXRecords)
			}
			if !tc.sparse {
				return
			}
			// The last byte is the data; what reads before it is a hole.
			n, err := io.CopyN(io.Discard, tr, size)
			if err != nil || n != size {
				t.Fatalf("read %d: %v", n, err)
			}
			if _, err := tr.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the entry: %v", err)
			}
		})
	}
}
