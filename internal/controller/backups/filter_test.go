package backups

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

func TestExcluded(t *testing.T) {
	patterns := []string{"node_modules", "*.log", "build/cache", "./dist/"}
	cases := []struct {
		name string
		want bool
	}{
		{".", false},
		{"src/a.go", false},
		{"node_modules", true},
		{"node_modules/x/y.js", true},
		{"a/b/node_modules/c", true},
		{"x.log", true},
		{"logs/x.log", true},
		{"x.log.txt", false},
		{"build/cache", true},
		{"build/cache/obj", true},
		{"build/out", false},
		{"keep/build/cache", false}, // a pattern with '/' is anchored at the top
		{"dist/a", false},           // "./dist/" is not cleaned to "dist": it matches nothing
		{"../node_modules", true},
		{"/abs/x.log", true},
	}
	for _, c := range cases {
		if got := excluded(c.name, patterns); got != c.want {
			t.Errorf("excluded(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidateExcludes(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		ok       bool
	}{
		{nil, true},
		{[]string{"*.log", "a/b", "[ab]c"}, true},
		{[]string{""}, false},
		{[]string{"[bad"}, false},
		{[]string{"/abs"}, false},
		{[]string{"a\x00b"}, false},
		{make([]string, maxExcludes+1), false},
	} {
		if err := validateExcludes(c.patterns); (err == nil) != c.ok {
			t.Errorf("validateExcludes(%q) = %v, want ok=%v", c.patterns, err, c.ok)
		}
	}
}

func makeTar(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(files[name]))
	}
	tw.Close()
	return buf.Bytes()
}

func tarNames(t testing.TB, b []byte) []string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatalf("output is not a valid tar: %v", err)
		}
		names = append(names, h.Name)
	}
}

func TestFilterTar(t *testing.T) {
	in := makeTar(t, map[string]string{"a.txt": "a", "x.log": "log", "node_modules/m.js": "m", "src/b.txt": "bb"})
	var out bytes.Buffer
	n, err := filterTar(bytes.NewReader(in), &out, []string{"*.log", "node_modules"}, 1<<20)
	if err != nil || n != 2 {
		t.Fatalf("filterTar: %d entries, %v", n, err)
	}
	if got := tarNames(t, out.Bytes()); !slices.Equal(got, []string{"a.txt", "src/b.txt"}) {
		t.Fatalf("kept %v", got)
	}
	// The size bound counts kept content only.
	if _, err := filterTar(bytes.NewReader(in), io.Discard, nil, 5); !errors.Is(err, errBackupTooLarge) {
		t.Fatalf("over the bound: %v, want errBackupTooLarge", err)
	}
	if _, err := filterTar(bytes.NewReader(in), io.Discard, []string{"*.log", "node_modules"}, 3); err != nil {
		t.Fatalf("within the bound once excluded: %v", err)
	}
	// A truncated stream is an error, never a short archive.
	big := makeTar(t, map[string]string{"big": string(make([]byte, 4096))})
	if _, err := filterTar(bytes.NewReader(big[:2000]), io.Discard, nil, 1<<20); err == nil {
		t.Fatal("a truncated tar was accepted")
	}
}

// FuzzFilterTar feeds arbitrary streams (a sandbox controls what its agent
// sends) and patterns: no panic, and what comes out is a valid tar holding
// no excluded name.
func FuzzFilterTar(f *testing.F) {
	f.Add(makeTar(f, map[string]string{"a": "1", "b/c.log": "2"}), "*.log")
	f.Add(makeTar(f, map[string]string{"../x": "1", "/abs": "2"}), "x")
	f.Add([]byte("not a tar"), "[")
	f.Fuzz(func(t *testing.T, in []byte, pattern string) {
		patterns := []string{pattern}
		if validateExcludes(patterns) != nil {
			patterns = nil
		}
		var out bytes.Buffer
		if _, err := filterTar(bytes.NewReader(in), &out, patterns, 1<<20); err != nil {
			return
		}
		for _, name := range tarNames(t, out.Bytes()) {
			if excluded(name, patterns) {
				t.Fatalf("excluded %q came through", name)
			}
		}
	})
}
