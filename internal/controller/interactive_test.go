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

func TestPreviewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := newPreviewToken()
		if !ValidPreviewToken(tok) || len(tok)*5 < 128 || strings.ToLower(tok) != tok {
			t.Fatalf("token %q: want >= 128 bits of lowercase base32", tok)
		}
		if seen[tok] {
			t.Fatal("a token repeated")
		}
		seen[tok] = true
	}
}

func TestParsePreviewHost(t *testing.T) {
	tok := newPreviewToken()
	id := "abcdefghij0123456789"
	cases := []struct {
		host, domain string
		ok           bool
		port         int
	}{
		{"8000-" + id + "-" + tok + ".localhost:8090", "localhost", true, 8000},
		{"8000-" + id + "-" + tok + ".localhost", "localhost", true, 8000},
		{"8000-" + id + "-" + strings.ToUpper(tok) + ".LOCALHOST", "localhost", true, 8000},
		{"443-" + id + "-" + tok + ".preview.example.com.", "preview.example.com", true, 443},
		{"8000-" + id + "-" + tok + ".evil.localhost", "localhost", false, 0},
		{"8000-" + id + "-" + tok + ".example.com", "localhost", false, 0},
		{"0-" + id + "-" + tok + ".localhost", "localhost", false, 0},
		{"65536-" + id + "-" + tok + ".localhost", "localhost", false, 0},
		{"080-" + id + "-" + tok + ".localhost", "localhost", false, 0},
		{"8000-" + id + "-short.localhost", "localhost", false, 0},
		{"8000-" + id + ".localhost", "localhost", false, 0},
		{"localhost", "localhost", false, 0},
		{"", "localhost", false, 0},
	}
	for _, tc := range cases {
		port, gotID, gotTok, ok := ParsePreviewHost(tc.host, tc.domain)
		if ok != tc.ok || (ok && (port != tc.port || gotID != id || gotTok != tok)) {
			t.Errorf("ParsePreviewHost(%q) = %d %q %q %v; want ok=%v port %d", tc.host, port, gotID, gotTok, ok, tc.ok, tc.port)
		}
	}
}

func FuzzParsePreviewHost(f *testing.F) {
	f.Add("8000-abcdefghij0123456789-" + strings.Repeat("a", 26) + ".localhost:8090")
	f.Add("1-a-b.localhost")
	f.Add("--.localhost")
	f.Fuzz(func(t *testing.T, host string) {
		port, id, tok, ok := ParsePreviewHost(host, "localhost")
		if !ok {
			return
		}
		if port < 1 || port > 65535 || !idRE.MatchString(id) || !ValidPreviewToken(tok) {
			t.Fatalf("ParsePreviewHost(%q) accepted %d %q %q", host, port, id, tok)
		}
	})
}

func FuzzMatchGlob(f *testing.F) {
	f.Add("*.pyc", "a/b.pyc")
	f.Add("a/[", "a/b")
	f.Fuzz(func(t *testing.T, glob, rel string) {
		_ = MatchGlob(glob, rel) // must not panic or loop on any input
	})
}
