package shellquote

import (
	"os/exec"
	"testing"
)

// TestQuoteRoundTrip: whatever a word holds, sh reads back exactly it.
func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "a b", "it's", `"dq"`, "$HOME", "`id`", "a\nb", "'", "''", `\`, "x;y|z&", "-n", "*", `a\b "c" $d $(id) ` + "`x`"} {
		for name, q := range map[string]func(string) string{"Quote": Quote, "Word": Word} {
			out, err := exec.Command("sh", "-c", "printf '%s' "+q(s)).Output()
			if err != nil || string(out) != s {
				t.Errorf("%s(%q) = %s: sh read %q (%v)", name, s, q(s), out, err)
			}
		}
	}
	if Word("a/b.c=1") != "a/b.c=1" || Word("a b") != "'a b'" {
		t.Errorf("Word quotes when it need not, or not when it must: %s %s", Word("a/b.c=1"), Word("a b"))
	}
}
