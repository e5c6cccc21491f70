// Package tarsafetest writes the tar entries archive/tar's Writer refuses
// to: sparse files in the PAX 1.0 and old GNU formats, as a hostile
// archive would carry them.
package tarsafetest

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

const block = 512

// header is a ustar header block with the fields the sparse entries use.
func header(name string, typ byte, size int64, gnu bool) []byte {
	b := make([]byte, block)
	copy(b[0:100], name)
	octal(b[100:108], 0o644)
	octal(b[108:116], 0)
	octal(b[116:124], 0)
	octal(b[124:136], size)
	octal(b[136:148], 1700000000)
	b[156] = typ
	if gnu {
		copy(b[257:265], "ustar  \x00")
	} else {
		copy(b[257:263], "ustar\x00")
		copy(b[263:265], "00")
	}
	return b
}

func octal(dst []byte, v int64) {
	s := strconv.FormatInt(v, 8)
	for len(s) < len(dst)-1 {
		s = "0" + s
	}
	copy(dst, s)
	dst[len(dst)-1] = 0
}

// finish writes the checksum of a header block.
func finish(b []byte) []byte {
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func pad(buf *bytes.Buffer) {
	if r := buf.Len() % block; r != 0 {
		buf.Write(make([]byte, block-r))
	}
}

func paxRecord(k, v string) string {
	// The length counts itself: grow it until it is stable.
	n := len(k) + len(v) + 3
	for {
		s := fmt.Sprintf("%d %s=%s\n", n, k, v)
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

// PAXSparse is one PAX 1.0 sparse entry (what GNU tar --sparse
// --format=pax writes): a file name of realSize bytes whose only data is
// data, at its end. It returns the entry's blocks, to be followed by more
// entries or End.
func PAXSparse(name string, realSize int64, data []byte) []byte {
	return PAXSparseAt(name, realSize, realSize-int64(len(data)), data)
}

// PAXSparseAt is PAXSparse with the data at offset off.
func PAXSparseAt(name string, realSize, off int64, data []byte) []byte {
	var buf bytes.Buffer
	recs := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", strconv.FormatInt(realSize, 10))
	buf.Write(finish(header("PaxHeaders.0/"+name, 'x', int64(len(recs)), false)))
	buf.WriteString(recs)
	pad(&buf)
	sparseMap := fmt.Sprintf("1\n%d\n%d\n", off, len(data))
	body := make([]byte, block, block+len(data))
	copy(body, sparseMap)
	body = append(body, data...)
	buf.Write(finish(header("GNUSparseFile.0/"+name, '0', int64(len(body)), false)))
	buf.Write(body)
	pad(&buf)
	return buf.Bytes()
}

// GNUSparse is one old-GNU sparse entry (type 'S'): name is realSize
// bytes, data at its end, the rest a hole.
func GNUSparse(name string, realSize int64, data []byte) []byte {
	var buf bytes.Buffer
	h := header(name, 'S', int64(len(data)), true)
	octal(h[386:398], realSize-int64(len(data)))
	octal(h[398:410], int64(len(data)))
	octal(h[483:495], realSize)
	buf.Write(finish(h))
	buf.Write(data)
	pad(&buf)
	return buf.Bytes()
}

// End is the two zero blocks that end an archive.
func End() []byte { return make([]byte, 2*block) }

// WatchUsage polls DiskUsage(dir) until stop is called, which returns the
// largest figure seen: what an importer wrote at its peak, before it
// cleaned up after a refusal.
func WatchUsage(dir string) (stop func() int64) {
	done := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var most int64
		for {
			most = max(most, DiskUsage(dir))
			select {
			case <-done:
				peak <- most
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-peak
	}
}

// DiskUsage is the space the files under dir take: allocated blocks, not
// sizes, so a sparse file counts what it really holds.
func DiskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
