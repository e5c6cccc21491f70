package egress

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunks is a reader that returns one scripted chunk per Read and counts
// the reads.
type chunks struct {
	parts [][]byte
	reads int
}

func (c *chunks) Read(p []byte) (int, error) {
	if c.reads >= len(c.parts) {
		return 0, io.EOF
	}
	part := c.parts[c.reads]
	c.reads++
	return copy(p, part), nil
}

// maskNaive is the reference: every occurrence of every pattern masked.
func maskNaive(in []byte, secrets []string) []byte {
	out := bytes.Clone(in)
	for _, s := range secrets {
		if len(s) < minScrubLen {
			continue
		}
		for i := 0; i+len(s) <= len(in); i++ {
			if string(in[i:i+len(s)]) == s {
				for m := i; m < i+len(s); m++ {
					out[m] = scrubMask
				}
			}
		}
	}
	return out
}

func TestScrubber(t *testing.T) {
	const sec = "s3cr3t-token-42"
	tests := []struct {
		name    string
		secrets []string
		parts   []string
	}{
		{"whole in one chunk", []string{sec}, []string{"auth: Bearer " + sec + "\n"}},
		{"split across chunks", []string{sec}, []string{"Bearer s3c", "r3t-tok", "en-42 end"}},
		{"one byte at a time", []string{sec}, strings.Split("x"+sec+"y"+sec, "")},
		{"twice, back to back", []string{sec}, []string{sec + sec}},
		{"self-overlapping", []string{"abababab"}, []string{"abababababab", "ab"}},
		{"two secrets, one inside the other", []string{"outer-secret-value", "secret-v"}, []string{"xx outer-secret-value yy secret-v"}},
		{"a prefix at the end stays", []string{sec}, []string{"tail s3cr3t-tok"}},
		{"short secrets are not scrubbed", []string{"abc"}, []string{"abc abc"}},
		{"nothing to scrub", []string{sec}, []string{"plain ", "text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []byte
			var parts [][]byte
			for _, p := range tt.parts {
				in = append(in, p...)
				parts = append(parts, []byte(p))
			}
			got, err := io.ReadAll(newScrubber(&chunks{parts: parts}, scrubPatterns(tt.secrets), nil))
			if err != nil {
				t.Fatal(err)
			}
			if want := maskNaive(in, tt.secrets); !bytes.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			for _, s := range tt.secrets {
				if len(s) >= minScrubLen && bytes.Contains(got, []byte(s)) {
					t.Fatalf("%q left in %q", s, got)
				}
			}
		})
	}
}

// TestScrubberDoesNotHoldStreams: bytes that cannot begin a secret are
// handed out without waiting for the next chunk.
func TestScrubberDoesNotHoldStreams(t *testing.T) {
	src := &chunks{parts: [][]byte{[]byte("data: one\n\n"), []byte("data: s3cr"), []byte("3t-token-42\n\n")}}
	r := newScrubber(src, scrubPatterns([]string{"s3cr3t-token-42"}), nil)
	buf := make([]byte, 100)
	n, _ := r.Read(buf)
	if string(buf[:n]) != "data: one\n\n" || src.reads != 1 {
		t.Fatalf("first read %q after %d source reads", buf[:n], src.reads)
	}
	n, _ = r.Read(buf)
	if string(buf[:n]) != "data: " {
		t.Fatalf("second read %q: only a possible secret's prefix may wait", buf[:n])
	}
	n, _ = r.Read(buf)
	if string(buf[:n]) != "***************\n\n" {
		t.Fatalf("third read %q", buf[:n])
	}
}

func TestScrubHeader(t *testing.T) {
	const sec = "s3cr3t-token-42"
	h := http.Header{
		"X-Echo":           {"Bearer " + sec},
		"X-" + sec:         {"1"},
		"Content-Type":     {"text/plain"},
		"X-Short":          {"abc"},
		"Www-Authenticate": {`Bearer realm="` + sec + `"`},
	}
	scrubHeader(h, scrubPatterns([]string{sec, "abc"}))
	for k, vs := range h {
		if strings.Contains(k, sec) {
			t.Errorf("name %q", k)
		}
		for _, v := range vs {
			if strings.Contains(v, sec) {
				t.Errorf("%s: %q", k, v)
			}
		}
	}
	if h.Get("X-Echo") != "Bearer ***************" || h.Get("Content-Type") != "text/plain" || h.Get("X-Short") != "abc" {
		t.Fatalf("%v", h)
	}
}

// FuzzScrubber: under any chunking, the stream comes out as the naive
// whole-buffer masking would make it.
func FuzzScrubber(f *testing.F) {
	f.Add([]byte("Bearer s3cr3t-token-42 and s3cr3t-token-42"), "s3cr3t-token-42", "token-42", uint8(3))
	f.Add([]byte("abababababab"), "abababab", "babababa", uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, a, b string, step uint8) {
		if len(in) > 1<<12 || len(a) > 256 || len(b) > 256 {
			return // the naive reference is quadratic
		}
		if step == 0 {
			step = 1
		}
		var parts [][]byte
		for i := 0; i < len(in); i += int(step) {
			parts = append(parts, in[i:min(len(in), i+int(step))])
		}
		got, err := io.ReadAll(newScrubber(&chunks{parts: parts}, scrubPatterns([]string{a, b}), nil))
		if err != nil {
			t.Fatal(err)
		}
		if want := maskNaive(in, []string{a, b}); !bytes.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}
