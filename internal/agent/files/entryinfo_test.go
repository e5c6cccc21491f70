package files

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/proto/gen/filesystem"
)

// TestEntryInfoSymlink checks envd's description of a symlink: its own
// name and permission string, the absolute path it resolves to, and the
// type and mode of what it points to.
func TestEntryInfoSymlink(t *testing.T) {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"to-file": "a.txt", "to-dir": "d", "chain": "to-file", "dangling": "nothing"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, target string
		typ          filesystem.FileType
		mode         uint32
	}{
		{"to-file", filepath.Join(real, "a.txt"), filesystem.FileType_FILE_TYPE_FILE, 0o640},
		{"chain", filepath.Join(real, "a.txt"), filesystem.FileType_FILE_TYPE_FILE, 0o640},
		{"to-dir", filepath.Join(real, "d"), filesystem.FileType_FILE_TYPE_DIRECTORY, 0o750},
		{"dangling", filepath.Join(dir, "dangling"), filesystem.FileType_FILE_TYPE_UNSPECIFIED, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := entryInfo(filepath.Join(dir, tc.name), nil)
			if err != nil {
				t.Fatal(err)
			}
			if e.Name != tc.name || e.GetSymlinkTarget() != tc.target || e.Type != tc.typ || e.Mode != tc.mode {
				t.Fatalf("got name %q target %q type %v mode %o; want %q %q %v %o", e.Name, e.GetSymlinkTarget(), e.Type, e.Mode, tc.name, tc.target, tc.typ, tc.mode)
			}
			if e.Permissions[0] != 'L' {
				t.Fatalf("permissions %q: want the link's own (L...)", e.Permissions)
			}
		})
	}
	e, err := entryInfo(filepath.Join(dir, "a.txt"), nil)
	if err != nil || e.SymlinkTarget != nil || e.Type != filesystem.FileType_FILE_TYPE_FILE {
		t.Fatalf("plain file: %+v %v", e, err)
	}
}
