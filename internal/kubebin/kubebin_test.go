package kubebin

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPathWritesOnce: the embedded daemon is written out read-only under
// a name of its content, once: a second call finds it; another content
// gets another name.
func TestPathWritesOnce(t *testing.T) {
	old := compressed
	t.Cleanup(func() { compressed = old })
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	dir := filepath.Join(t.TempDir(), "bin")
	compressed = gz("one")
	p, err := Path(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(p), Name+"-") || filepath.Dir(p) != dir {
		t.Fatalf("written to %s", p)
	}
	b, err := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if err != nil || string(b) != "one" || fi.Mode().Perm() != 0o555 {
		t.Fatalf("written %q (%v), mode %v", b, err, fi.Mode())
	}
	again, err := Path(dir)
	if err != nil || again != p {
		t.Fatalf("second call: %s, %v", again, err)
	}
	compressed = gz("two")
	other, err := Path(dir)
	if err != nil || other == p {
		t.Fatalf("another build: %s, %v", other, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	compressed = []byte("not gzip")
	if _, err := Path(t.TempDir()); err == nil {
		t.Error("a damaged embedded binary was written out")
	}
}

// TestPathWithoutEmbedded: a build without the embedded daemon runs none
// unless one is beside its executable (a test binary has none), and says
// how to build it.
func TestPathWithoutEmbedded(t *testing.T) {
	old := compressed
	t.Cleanup(func() { compressed = old })
	compressed = nil
	if _, err := Path(t.TempDir()); !errors.Is(err, ErrMissing) {
		t.Fatalf("Path: %v, want ErrMissing", err)
	}
	if err := Exec(t.TempDir(), []string{"serve"}); !errors.Is(err, ErrMissing) {
		t.Fatalf("Exec: %v, want ErrMissing", err)
	}
}
