package sessions

import (
	"bytes"
	"strings"
	"testing"
)

func TestMarkerScanner(t *testing.T) {
	marker := "__PADDOCK_x_RC_"
	cases := []struct {
		name   string
		chunks []string
		out    string
		rest   string
		found  bool
	}{
		{"marker alone", []string{marker + "0:/\x1e"}, "", "0:/\x1e", true},
		{"output then marker", []string{"hello\n" + marker + "1"}, "hello\n", "1", true},
		{"marker split over chunks", []string{"ab__PAD", "DOCK_x", "_RC_3"}, "ab", "3", true},
		{"a prefix that is not the marker", []string{"__PADDOCK_y", " end"}, "__PADDOCK_y end", "", false},
		{"no marker", []string{"plain", " text"}, "plain text", "", false},
		{"underscores before the marker", []string{"___", "_PADDOCK_x_RC_9"}, "__", "9", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := markerScanner{marker: []byte(marker)}
			var out, rest strings.Builder
			found := false
			for _, ch := range c.chunks {
				o, r, done := m.feed([]byte(ch))
				out.Write(o)
				rest.Write(r)
				found = found || done
			}
			if out.String() != c.out || rest.String() != c.rest || found != c.found {
				t.Fatalf("out %q rest %q found %v; want %q %q %v", out.String(), rest.String(), found, c.out, c.rest, c.found)
			}
		})
	}
}

// FuzzMarkerScanner feeds arbitrary sandbox output, split anywhere: what
// comes out before the marker must be exactly the input before it.
func FuzzMarkerScanner(f *testing.F) {
	f.Add([]byte("hello __PADDOCK_n_RC_0:/tmp\x1e"), uint8(3))
	f.Add([]byte("____PADDOCK_n_RC__PADDOCK_n_RC_12"), uint8(1))
	f.Add([]byte("no marker at all"), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		marker := []byte("__PADDOCK_n_RC_")
		m := markerScanner{marker: marker}
		step := int(split%16) + 1
		var out []byte
		found := false
		for i := 0; i < len(in) && !found; i += step {
			o, _, done := m.feed(in[i:min(len(in), i+step)])
			out = append(out, o...)
			found = done
		}
		idx := bytes.Index(in, marker)
		switch {
		case idx >= 0 && (!found || !bytes.Equal(out, in[:idx])):
			t.Fatalf("marker at %d: found %v, out %q", idx, found, out)
		case idx < 0 && found:
			t.Fatalf("found a marker that is not there in %q", in)
		case idx < 0 && !bytes.Equal(out, in[:len(out)]):
			t.Fatalf("output %q is not a prefix of the input %q", out, in)
		case idx < 0 && len(in)-len(out) >= len(marker):
			t.Fatalf("held back %d bytes, more than a marker prefix", len(in)-len(out))
		}
	})
}
