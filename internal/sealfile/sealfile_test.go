package sealfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInstall: the file lands read-only under its name; a second install
// of the name keeps the first file and leaves no temporary one.
func TestInstall(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "prog-abc")
	write := func(content string) (string, error) {
		tmp, err := os.CreateTemp(dir, ".tmp-*")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(tmp.Name())
		if _, err := tmp.WriteString(content); err != nil {
			t.Fatal(err)
		}
		return Install(tmp, dst)
	}
	if p, err := write("one"); err != nil || p != dst {
		t.Fatalf("install: %s, %v", p, err)
	}
	if p, err := write("two"); err != nil || p != dst {
		t.Fatalf("second install: %s, %v", p, err)
	}
	b, _ := os.ReadFile(dst)
	fi, err := os.Stat(dst)
	if err != nil || string(b) != "one" || fi.Mode().Perm() != 0o555 {
		t.Fatalf("installed %q, mode %v, %v", b, fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
