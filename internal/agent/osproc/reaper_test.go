package osproc

import "testing"

func TestChildOOMScore(t *testing.T) {
	for own, want := range map[int]int{-998: 0, -1: 0, 0: 500, 300: 800, 700: 1000, 1000: 1000} {
		if got := ChildOOMScore(own); got != want {
			t.Errorf("ChildOOMScore(%d) = %d, want %d", own, got, want)
		}
	}
}
