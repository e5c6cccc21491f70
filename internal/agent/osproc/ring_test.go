package osproc

import (
	"bytes"
	"testing"
)

func TestRing(t *testing.T) {
	cases := []struct {
		name   string
		cap    int64
		writes []string
		from   int64
		want   string
		at     int64
		drop   int64
	}{
		{"empty", 8, nil, 0, "", 0, 0},
		{"fits", 8, []string{"abc", "de"}, 0, "abcde", 0, 0},
		{"from an offset", 8, []string{"abcdef"}, 2, "cdef", 2, 0},
		{"wraps", 8, []string{"abcdef", "ghijk"}, 0, "defghijk", 3, 3},
		{"one write larger than the ring", 4, []string{"ab", "cdefghij"}, 0, "ghij", 6, 6},
		{"exactly full", 4, []string{"abcd"}, 0, "abcd", 0, 0},
		{"offset past the end", 4, []string{"ab"}, 9, "", 2, 0},
		{"many small writes", 5, []string{"a", "b", "c", "d", "e", "f", "g"}, 1, "cdefg", 2, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRing(c.cap)
			total := 0
			for _, w := range c.writes {
				r.Write([]byte(w))
				total += len(w)
			}
			data, at, dropped, _, _ := r.ReadAt(c.from, 1<<20)
			if string(data) != c.want || at != c.at || dropped != c.drop {
				t.Fatalf("readAt(%d) = %q at %d dropped %d; want %q at %d dropped %d", c.from, data, at, dropped, c.want, c.at, c.drop)
			}
			info := r.Info()
			if info.GetEnd() != int64(total) || info.GetTruncated() != (int64(total) > c.cap) || int64(len(r.buf)) > c.cap {
				t.Fatalf("info %+v, buffer %d bytes", info, len(r.buf))
			}
		})
	}
}

// TestRingMatchesTail checks the ring against the plain truth (the last
// cap bytes of everything written) over many write sizes.
func TestRingMatchesTail(t *testing.T) {
	r := NewRing(1000)
	var all bytes.Buffer
	for i := range 500 {
		chunk := bytes.Repeat([]byte{byte('a' + i%26)}, (i*37)%301)
		r.Write(chunk)
		all.Write(chunk)
		want := all.Bytes()[max(0, all.Len()-1000):]
		got, _, _, _, _ := r.ReadAt(0, 1<<20)
		if !bytes.Equal(got, want) {
			t.Fatalf("after write %d: ring holds %d bytes that differ from the last %d written", i, len(got), len(want))
		}
		if tail := r.Tail(10); !bytes.Equal(tail, want[max(0, len(want)-10):]) {
			t.Fatalf("tail %q", tail)
		}
	}
}
