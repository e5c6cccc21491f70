package snapshot

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSnapshotLayer measures copying and committing a writable layer
// of a given amount of changes (1 MiB files, incompressible), the work a
// snapshot does while the sandbox is frozen plus the digest after, with
// the object pool on (the default) and off: what pooling costs a first
// snapshot, which finds nothing to share.
func BenchmarkSnapshotLayer(b *testing.B) {
	for _, mb := range []int{10, 100} {
		for _, pool := range []bool{true, false} {
			b.Run(fmt.Sprintf("%dMB/pool=%v", mb, pool), func(b *testing.B) {
				src := b.TempDir()
				writeRandomFiles(b, src, mb, 1<<20)
				opts := Options{Dir: filepath.Join(b.TempDir(), "s")}
				if !pool {
					opts.MinLinkSize = -1
				}
				s, err := Open(opts)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(mb) << 20)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					l := benchCommit(b, s, src)
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
}

// BenchmarkSecondSnapshot measures a second snapshot of a 100 MiB layer
// after 1 MiB of it changed, with the bytes it newly stores, beside a
// plain copy and fsync of the same 100 MiB (what storing the layer again
// in full costs at least). Deduplication is per file: "100-files" rewrites
// one of 100 files of 1 MiB; "one-file" rewrites 1 MiB inside a single
// 100 MiB file, which is then stored again whole.
func BenchmarkSecondSnapshot(b *testing.B) {
	requireRoot(b)
	layouts := []struct {
		name         string
		files, size  int
		rewrite      func(b *testing.B, src string)
		plainCopySrc bool
	}{
		{"100-files", 100, 1 << 20, func(b *testing.B, src string) {
			writeRandom(b, filepath.Join(src, "f000"), 0, 1<<20)
		}, false},
		{"one-file", 1, 100 << 20, func(b *testing.B, src string) {
			writeRandom(b, filepath.Join(src, "f000"), 50<<20, 1<<20)
		}, false},
		{"plain-copy", 100, 1 << 20, nil, true},
	}
	for _, lay := range layouts {
		b.Run(lay.name, func(b *testing.B) {
			src := b.TempDir()
			writeRandomFiles(b, src, lay.files, lay.size)
			b.SetBytes(100 << 20)
			if lay.plainCopySrc {
				dst := filepath.Join(b.TempDir(), "copy")
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					plainCopy(b, src, dst)
					b.StopTimer()
					os.RemoveAll(dst)
					b.StartTimer()
				}
				b.ReportMetric(100<<20, "stored-bytes")
				return
			}
			s, err := Open(Options{Dir: filepath.Join(b.TempDir(), "s")})
			if err != nil {
				b.Fatal(err)
			}
			benchCommit(b, s, src)
			var added int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				lay.rewrite(b, src)
				b.StartTimer()
				l := benchCommit(b, s, src)
				b.StopTimer()
				added = l.Added
				if err := s.RemoveLayer(l.Digest); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(added), "stored-bytes")
		})
	}
}

// BenchmarkCommitSmallFiles is the measurement behind DefaultMinLinkSize:
// a second commit of 1000 files of one size after one of them changed,
// with every file pooled or none, and the bytes each commit adds.
func BenchmarkCommitSmallFiles(b *testing.B) {
	requireRoot(b)
	for _, size := range []int{512, 4 << 10, 16 << 10, 64 << 10} {
		for _, pooled := range []bool{false, true} {
			min := int64(-1)
			if pooled {
				min = 1
			}
			b.Run(fmt.Sprintf("%dB/pool=%v", size, pooled), func(b *testing.B) {
				src := b.TempDir()
				writeRandomFiles(b, src, 1000, size)
				s, err := Open(Options{Dir: filepath.Join(b.TempDir(), "s"), MinLinkSize: min})
				if err != nil {
					b.Fatal(err)
				}
				benchCommit(b, s, src)
				var added int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					writeRandom(b, filepath.Join(src, "f000"), 0, size)
					b.StartTimer()
					l := benchCommit(b, s, src)
					b.StopTimer()
					added = l.Added
					if err := s.RemoveLayer(l.Digest); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(added), "added-bytes")
			})
		}
	}
}

// BenchmarkRestoreCheck compares the check a restore runs (CheckLayer: a
// stat walk against the seal) with re-hashing the layer (VerifyLayer, what
// export runs), on 100 MiB in 100 files and on 10000 files of 4 KiB. The
// page cache is warm, so the hash figure is a floor.
func BenchmarkRestoreCheck(b *testing.B) {
	requireRoot(b)
	for _, lay := range []struct {
		name        string
		files, size int
	}{{"100x1MiB", 100, 1 << 20}, {"10000x4KiB", 10000, 4 << 10}} {
		src := b.TempDir()
		writeRandomFiles(b, src, lay.files, lay.size)
		s, err := Open(Options{Dir: filepath.Join(b.TempDir(), "s")})
		if err != nil {
			b.Fatal(err)
		}
		l := benchCommit(b, s, src)
		ctx := context.Background()
		b.Run(lay.name+"/seal", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := s.CheckLayer(ctx, l.Digest); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(lay.name+"/hash", func(b *testing.B) {
			b.SetBytes(int64(lay.files * lay.size))
			for i := 0; i < b.N; i++ {
				if _, err := s.VerifyLayer(ctx, l.Digest); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchCommit(b *testing.B, s *Store, src string) Layer {
	b.Helper()
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
	return l
}

func writeRandomFiles(b *testing.B, dir string, n, size int) {
	b.Helper()
	for i := 0; i < n; i++ {
		writeRandom(b, filepath.Join(dir, fmt.Sprintf("f%03d", i)), 0, size)
	}
}

// writeRandom writes n random bytes at off into p, creating it.
func writeRandom(b *testing.B, p string, off int64, n int) {
	b.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, int64(n)); err != nil {
		b.Fatal(err)
	}
}

// plainCopy copies src's files into dst and flushes them: the floor for
// persisting that many bytes.
func plainCopy(b *testing.B, src, dst string) {
	b.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		b.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			b.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	if err := syncTree(dst); err != nil {
		b.Fatal(err)
	}
}
