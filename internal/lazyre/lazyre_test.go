package lazyre

import (
	"testing"
)

func TestRegexp(t *testing.T) {
	re := New(`^([a-z]{1,3})-([0-9]{0,255})$`)
	if re.re != nil {
		t.Fatal("compiled before first use")
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"ab-12", true},
		{"abcd-1", false},
		{"a-", true},
		{"", false},
	} {
		if got := re.MatchString(tc.in); got != tc.want {
			t.Errorf("MatchString(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if m := re.FindStringSubmatch("ab-12"); len(m) != 3 || m[1] != "ab" || m[2] != "12" {
		t.Errorf("FindStringSubmatch = %q", m)
	}
	if re.String() != `^([a-z]{1,3})-([0-9]{0,255})$` {
		t.Errorf("String = %q", re.String())
	}
}

func TestBadPatternPanicsOnUse(t *testing.T) {
	re := New(`(`)
	defer func() {
		if recover() == nil {
			t.Fatal("a bad pattern did not panic on first use")
		}
	}()
	re.MatchString("x")
}
