package rules

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

func TestValidName(t *testing.T) {
	for _, s := range []string{"a", "web-1", "A.b_c", strings.Repeat("x", 63)} {
		if !ValidName(s) {
			t.Errorf("ValidName(%q) = false", s)
		}
	}
	for _, s := range []string{"", "-a", ".a", "a b", "a/b", strings.Repeat("x", 64), "é"} {
		if ValidName(s) {
			t.Errorf("ValidName(%q) = true", s)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"90s", 90 * time.Second, true},
		{"8760h", MaxDuration, true},
		{"8761h", 0, false},
		{"500ms", 0, false}, // below the minimum of 1s
		{"-1s", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration("timeout", tt.in, time.Second)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParseDuration(%q): %v is not invalid-argument", tt.in, err)
		}
	}
	_, err := ParseDuration("timeout", strings.Repeat("9", 500), time.Second)
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("a long bad duration's error quotes it whole: %v", err)
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("abcdef", 3); got != "abc..." {
		t.Errorf("Truncate = %q", got)
	}
	if got := Truncate("abc", 3); got != "abc" {
		t.Errorf("Truncate = %q", got)
	}
}

func TestTemplateRef(t *testing.T) {
	for in, want := range map[string]string{
		"py": "py", "py:v1": "py:v1", "py:default": "py", "py.3:v1.0-rc_1": "py.3:v1.0-rc_1",
		"": "", "py:": "", ":v1": "", "py:v1:v2": "", "-py": "", "py:-v1": "", "py/x": "",
	} {
		got, ok := TemplateRef(in)
		if got != want || ok != (want != "") {
			t.Errorf("TemplateRef(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	if n, tag := SplitTemplateTag("py"); n != "py" || tag != DefaultTag {
		t.Errorf("split py: %q %q", n, tag)
	}
	if n, tag := SplitTemplateTag("py:v1"); n != "py" || tag != "v1" {
		t.Errorf("split py:v1: %q %q", n, tag)
	}
}

// FuzzTemplateRef: a name accepted is canonical (accepting it again gives
// it back), holds at most one colon, is never tagged "default", and splits
// back into a name and a tag that are each valid names.
func FuzzTemplateRef(f *testing.F) {
	for _, s := range []string{"py", "py:v1", "py:default", "py:", ":x", "a:b:c", "py/../x", "py:\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := TemplateRef(s)
		if !ok {
			return
		}
		if again, ok2 := TemplateRef(got); !ok2 || again != got {
			t.Fatalf("TemplateRef(%q) = %q, which gives %q %v", s, got, again, ok2)
		}
		name, tag := SplitTemplateTag(got)
		if !ValidName(name) || !ValidName(tag) || TemplateName(name, tag) != got || strings.Count(got, ":") > 1 || strings.HasSuffix(got, ":"+DefaultTag) {
			t.Fatalf("TemplateRef(%q) = %q: split %q %q", s, got, name, tag)
		}
	})
}
