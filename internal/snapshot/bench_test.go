package snapshot

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSnapshotLayer measures copying and committing a writable layer
// of a given amount of changes (1 MiB files, incompressible), the work a
// snapshot does while the sandbox is frozen plus the digest after.
func BenchmarkSnapshotLayer(b *testing.B) {
	for _, mb := range []int{10, 100} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			src := b.TempDir()
			buf := make([]byte, 1<<20)
			for i := 0; i < mb; i++ {
				rand.Read(buf)
				if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), buf, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			s, err := Open(Options{Dir: filepath.Join(b.TempDir(), "s")})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(mb) << 20)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tmp, err := s.Temp()
				if err != nil {
					b.Fatal(err)
				}
				if err := CopyTree(context.Background(), src, tmp, TreeOptions{}); err != nil {
					b.Fatal(err)
				}
				l, err := s.Commit(context.Background(), tmp)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(l.Size), "layer-bytes")
				if err := s.RemoveLayer(l.Digest); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
