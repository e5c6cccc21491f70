package e2e

import (
	"archive/tar"
	"os"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/testdaemon"
)

func writeTar(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	dirs := map[string]bool{}
	for name, body := range files {
		parts := strings.Split(name, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, Uid: 1000, Gid: 1000}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Uid: 1000, Gid: 1000}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// readTar returns the regular files of a tar, by name without a leading "./" or "/".
func readTar(t *testing.T, path string) map[string]string {
	t.Helper()
	return testdaemon.ReadTar(t, path)
}

func keys(m map[string]string) []string { return testdaemon.SortedKeys(m) }
