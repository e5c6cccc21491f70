package portfwd

import (
	"strconv"
	"testing"
)

func TestParsePort(t *testing.T) {
	cases := []struct {
		in   string
		want int
		ok   bool
	}{
		{"1", 1, true},
		{"8000", 8000, true},
		{"65535", 65535, true},
		{"0", 0, false},
		{"65536", 0, false},
		{"-1", 0, false},
		{"+80", 0, false},
		{"080", 0, false},
		{"", 0, false},
		{"80a", 0, false},
		{"999999999999", 0, false},
	}
	for _, tc := range cases {
		got, err := ParsePort(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePort(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"1", "65535", "0", "080", "+1", "-0", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParsePort(s)
		if err != nil {
			return
		}
		if n < 1 || n > 65535 || strconv.Itoa(n) != s {
			t.Fatalf("ParsePort(%q) = %d: accepted a non-canonical or out-of-range port", s, n)
		}
	})
}
