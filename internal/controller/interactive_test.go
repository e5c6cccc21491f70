package controller

import (
	"strings"
	"testing"
)

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		glob, rel string
		want      bool
	}{
		{"*.pyc", "a.pyc", true},
		{"*.pyc", "src/deep/a.pyc", true},
		{"*.pyc", "src/a.py", false},
		{"node_modules", "node_modules", true},
		{"node_modules", "web/node_modules/x/y.js", true},
		{"node_modules", "web/node_modules_old/y.js", false},
		{"build/*", "build/out", true},
		{"build/*", "build/out/deep/file", true},
		{"build/*", "src/build/out", false},
		{"src/*.go", "src/a.go", true},
		{"src/*.go", "src/sub/a.go", false},
		{"[ab].txt", "b.txt", true},
	}
	for _, tc := range cases {
		if got := MatchGlob(tc.glob, tc.rel); got != tc.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", tc.glob, tc.rel, got, tc.want)
		}
	}
}

func TestKeepWatched(t *testing.T) {
	o := &WatchOptions{Include: []string{"*.py", "docs"}, Exclude: []string{"test_*"}}
	cases := map[string]bool{
		"a.py":          true,
		"pkg/b.py":      true,
		"pkg/test_b.py": false,
		"docs/x.md":     true,
		"README.md":     false,
	}
	for rel, want := range cases {
		if got := keepWatched(o, rel); got != want {
			t.Errorf("keepWatched(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestValidateWatch(t *testing.T) {
	cases := []struct {
		name string
		o    WatchOptions
		ok   bool
	}{
		{"plain", WatchOptions{Path: "/tmp"}, true},
		{"no path", WatchOptions{}, false},
		{"nul", WatchOptions{Path: "/tmp/\x00"}, false},
		{"bad glob", WatchOptions{Path: "/tmp", Include: []string{"[a"}}, false},
		{"empty glob", WatchOptions{Path: "/tmp", Exclude: []string{""}}, false},
		{"long glob", WatchOptions{Path: "/tmp", Exclude: []string{strings.Repeat("a", 300)}}, false},
		{"too many globs", WatchOptions{Path: "/tmp", Exclude: make([]string, 40)}, false},
		{"bad user", WatchOptions{Path: "/tmp", User: "Root!"}, false},
	}
	for _, tc := range cases {
		if err := validateWatch(&tc.o); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func FuzzMatchGlob(f *testing.F) {
	f.Add("*.pyc", "a/b.pyc")
	f.Add("a/[", "a/b")
	f.Fuzz(func(t *testing.T, glob, rel string) {
		_ = MatchGlob(glob, rel) // must not panic or loop on any input
	})
}
