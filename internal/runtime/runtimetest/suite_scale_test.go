package runtimetest

import (
	"testing"
	"time"
)

func TestScaled(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
	}{
		{"", time.Second}, {"1", time.Second}, {"4", 4 * time.Second}, {"20", 20 * time.Second},
		{"0", time.Second}, {"-3", time.Second}, {"21", time.Second}, {"x", time.Second}, {"2.5", time.Second},
	} {
		t.Setenv("PADDOCK_TEST_TIME_SCALE", tc.env)
		if got := Scaled(time.Second); got != tc.want {
			t.Errorf("scale %q: %s, want %s", tc.env, got, tc.want)
		}
	}
}
