package tree

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func sample(t testing.TB) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		rec  Record
		body string
	}{
		{Record{Kind: KindDir, Path: "d", Mode: 0o755, Mtime: 42}, ""},
		{Record{Kind: KindFile, Path: "d/a", Mode: 0o644, Mtime: 43, Ino: 7, Ctime: 1e18, Size: 5}, "hello"},
		{Record{Kind: KindFile, Path: "d/short", Mode: 0o600, Ino: 8, Ctime: 2, Size: 4}, "ab"},
		{Record{Kind: KindUnchanged, Path: "d/same", Mode: 0o644, Ino: 9, Ctime: 3, Size: 100}, ""},
		{Record{Kind: KindOther, Path: "d/link"}, ""},
	} {
		if err := w.Write(r.rec, strings.NewReader(r.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAll(data []byte) ([]string, error) {
	r := NewReader(bytes.NewReader(data))
	var out []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		body, err := io.ReadAll(r)
		if err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%c %s %o %d %d %d %d %q", rec.Kind, rec.Path, rec.Mode, rec.Mtime, rec.Ino, rec.Ctime, rec.Size, body))
	}
}

func TestRoundTrip(t *testing.T) {
	got, err := readAll(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`d d 755 42 0 0 0 ""`,
		`f d/a 644 43 7 1000000000000000000 5 "hello"`,
		`f d/short 600 0 8 2 4 "ab\x00\x00"`,
		`u d/same 644 0 9 3 100 ""`,
		`o d/link 0 0 0 0 0 ""`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got\n%v\nwant\n%v", got, want)
	}
	// Content not read is skipped.
	r := NewReader(bytes.NewReader(sample(t)))
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			if !errors.Is(err, io.EOF) || n != 5 {
				t.Fatalf("after %d records: %v", n, err)
			}
			break
		}
		n++
	}
}

// TestCutShort: every stream cut before its end record is an error.
func TestCutShort(t *testing.T) {
	data := sample(t)
	for i := 0; i < len(data); i++ {
		if _, err := readAll(data[:i]); !errors.Is(err, ErrFormat) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d of %d: %v", i, len(data), err)
		}
	}
	bad := append([]byte{}, data...)
	bad[len(bad)-8]++ // the end's count
	if _, err := readAll(bad); !errors.Is(err, ErrFormat) {
		t.Fatalf("a wrong count: %v", err)
	}
}

func TestWriterRefuses(t *testing.T) {
	w, _ := NewWriter(io.Discard)
	for _, r := range []Record{{Kind: KindDir}, {Kind: KindDir, Path: strings.Repeat("a", MaxPath+1)}, {Kind: 'x', Path: "a"}, {Kind: KindFile, Path: "a", Size: -1}} {
		if err := w.Write(r, strings.NewReader("")); err == nil {
			t.Errorf("%+v written", r)
		}
	}
}

// FuzzReader: whatever a sandbox sends, the reader ends (a record at a
// time, each path within bounds and without NUL, content within its size)
// with io.EOF or an error, never a panic.
func FuzzReader(f *testing.F) {
	f.Add(sample(f))
	f.Add([]byte(Magic))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for i := 0; ; i++ {
			rec, err := r.Next()
			if err != nil {
				return
			}
			if len(rec.Path) == 0 || len(rec.Path) > MaxPath || strings.IndexByte(rec.Path, 0) >= 0 || rec.Size < 0 {
				t.Fatalf("record %+v", rec)
			}
			n, _ := io.Copy(io.Discard, r)
			if n > rec.Size {
				t.Fatalf("%d bytes of content for a size of %d", n, rec.Size)
			}
			if i > len(data) {
				t.Fatal("more records than bytes")
			}
		}
	})
}
