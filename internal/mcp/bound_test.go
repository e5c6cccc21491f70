package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

func TestHeadTail(t *testing.T) {
	tests := []struct {
		name      string
		writes    []string
		want      string
		truncated bool
	}{
		{"empty", nil, "", false},
		{"fits", []string{"abc", "def"}, "abcdef", false},
		{"exactly full", []string{"0123456789"}, "0123456789", false},
		{"cut in the middle", []string{"0123", "456789", "abcdef"}, "0123\n[... 6 bytes omitted; HINT ...]\nabcdef", true},
		{"one huge write", []string{strings.Repeat("x", 100) + "END"}, "xxxx\n[... 93 bytes omitted; HINT ...]\nxxxEND", true},
		{"many small writes", strings.Split(strings.Repeat("y", 50)+"tail!", ""), "yyyy\n[... 45 bytes omitted; HINT ...]\nytail!", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHeadTail(4, 6)
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := b.text("HINT"); got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
			if b.truncated() != tt.truncated {
				t.Errorf("truncated = %v", b.truncated())
			}
		})
	}
}

func TestSliceLines(t *testing.T) {
	long := strings.Repeat("z", maxLineChars+10) + "\n"
	tests := []struct {
		name                    string
		data                    string
		offset, limit, maxChars int
		text                    string
		start, end, total       int
		truncated               bool
		cut                     int
	}{
		{"whole", "a\nb\nc\n", 0, 0, 100, "a\nb\nc\n", 1, 3, 3, false, 0},
		{"no final newline", "a\nb", 1, 10, 100, "a\nb", 1, 2, 2, false, 0},
		{"range", "a\nb\nc\nd\n", 2, 2, 100, "b\nc\n", 2, 3, 4, false, 0},
		{"past the end", "a\n", 5, 2, 100, "", 5, 4, 1, false, 0},
		{"empty file", "", 1, 10, 100, "", 1, 0, 0, false, 0},
		{"char budget", "aaaa\nbbbb\ncccc\n", 1, 0, 10, "aaaa\nbbbb\n", 1, 2, 3, true, 0},
		{"first line alone over budget", "aaaaaaaa\nb\n", 1, 0, 3, "aaaaaaaa\n", 1, 1, 2, true, 0},
		{"long line cut", long, 1, 0, 1 << 20, strings.Repeat("z", maxLineChars) + fmt.Sprintf("[... line cut at %d characters]\n", maxLineChars), 1, 1, 1, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sliceLines(tt.data, tt.offset, tt.limit, tt.maxChars)
			if r.text != tt.text || r.start != tt.start || r.end != tt.end || r.total != tt.total || r.truncated != tt.truncated || r.cutLines != tt.cut {
				t.Errorf("sliceLines = %+v", r)
			}
		})
	}
}

func TestParseGrepLine(t *testing.T) {
	tests := []struct {
		in   string
		want GrepMatch
		ok   bool
	}{
		{"/home/user/a.py:12:def f():", GrepMatch{"/home/user/a.py", 12, "def f():"}, true},
		{"a.py:3:x:4:y", GrepMatch{"a.py", 3, "x:4:y"}, true},
		{"dir:x/a.py:7:", GrepMatch{"dir:x/a.py", 7, ""}, true},
		{"no line number", GrepMatch{}, false},
		{"a.py:0:zero is not a line", GrepMatch{}, false},
		{"a.py::empty", GrepMatch{}, false},
		{"a.py:5:" + strings.Repeat("w", 400), GrepMatch{"a.py", 5, strings.Repeat("w", 300) + "…"}, true},
	}
	for _, tt := range tests {
		got, ok := parseGrepLine(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseGrepLine(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestToolErrorHints(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("sandbox x: %w", paddock.ErrNotFound), "sandbox_list"},
		{fmt.Errorf("too big: %w", paddock.ErrResourceExhausted), "ask for less"},
		{fmt.Errorf("no key: %w", paddock.ErrUnauthenticated), "configuration"},
		{fmt.Errorf("down: %w", paddock.ErrUnavailable), "retry"},
		{errors.New("plain"), "plain"},
	}
	for _, tt := range tests {
		if got := toolError("op", tt.err).Error(); !strings.Contains(got, tt.want) || !strings.HasPrefix(got, "op: ") {
			t.Errorf("toolError(%v) = %q, want it to mention %q", tt.err, got, tt.want)
		}
	}
}

func TestBoundsRefuseBadInput(t *testing.T) {
	for _, ref := range []string{"a/b", "x\x00", strings.Repeat("n", 200), "two words"} {
		if checkRef(ref) == nil {
			t.Errorf("checkRef(%q) accepted", ref)
		}
	}
	for _, p := range []string{"", "a\x00b", strings.Repeat("p", 5000)} {
		if checkPath("path", p) == nil {
			t.Errorf("checkPath(%q) accepted", p)
		}
	}
	if _, err := bound("n", -1, 10, 100); err == nil {
		t.Error("bound accepted a negative count")
	}
	if _, err := bound("n", 101, 10, 100); err == nil {
		t.Error("bound accepted a count over the ceiling")
	}
	if v, _ := bound("n", 0, 10, 100); v != 10 {
		t.Errorf("bound default = %d", v)
	}
	w := &limitWriter{n: 4}
	if _, err := w.Write([]byte("12345")); !errors.Is(err, errTooLarge) {
		t.Errorf("limitWriter let 5 bytes through a 4-byte limit: %v", err)
	}
}

// FuzzParseGrepLine feeds the parser what a sandbox's grep may print: it
// comes from inside the sandbox and is untrusted.
func FuzzParseGrepLine(f *testing.F) {
	for _, s := range []string{"a:1:b", "::::", "x:99999999999999999999:y", "\xff:1:\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := parseGrepLine(s)
		if !ok {
			return
		}
		if m.Line <= 0 || !utf8.ValidString(m.File) || !utf8.ValidString(m.Text) || len(m.Text) > 300+len("…") {
			t.Fatalf("parseGrepLine(%q) = %+v", s, m)
		}
	})
}

// FuzzHeadTail checks that the kept text is always the true start and end
// of what was written, whatever the write sizes.
func FuzzHeadTail(f *testing.F) {
	f.Add([]byte("hello world"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		c := int(chunk)%17 + 1
		b := newHeadTail(5, 7)
		for i := 0; i < len(data); i += c {
			_, _ = b.Write(data[i:min(i+c, len(data))])
		}
		if !b.truncated() {
			if !bytes.Equal(append(append([]byte{}, b.h...), b.kept()...), data) {
				t.Fatalf("untruncated text differs")
			}
			return
		}
		if !bytes.Equal(b.h, data[:5]) || !bytes.Equal(b.kept(), data[len(data)-7:]) {
			t.Fatalf("head %q tail %q of %q", b.h, b.kept(), data)
		}
	})
}
