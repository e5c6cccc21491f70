package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/agent/tree"
)

// TestWriteTree: every entry comes with its mode and times, each file
// with its inode and change time; a file changed before the asked time
// comes without its content, one changed after it (written, or moved over
// another) with it; symlinks are named, never followed.
func TestWriteTree(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"old", "moved", "target", "sub/kept"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f+"-body"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(30 * time.Millisecond) // past the change times' coarse clock
	before := time.Now().UnixNano()
	time.Sleep(30 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "new"), []byte("new-body"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "moved"), filepath.Join(dir, "target")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeTree(context.Background(), &buf, dir, before); err != nil {
		t.Fatal(err)
	}
	r := tree.NewReader(&buf)
	got := map[string]string{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r)
		got[rec.Path] = fmt.Sprintf("%c %o %q", rec.Kind, rec.Mode, body)
		if rec.Kind != tree.KindFile && rec.Kind != tree.KindUnchanged {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, rec.Path), &st); err != nil {
			t.Fatal(err)
		}
		if rec.Ino != st.Ino || rec.Ctime != st.Ctim.Nano() || rec.Mtime != st.Mtim.Nano() || rec.Size != st.Size {
			t.Errorf("%s: %+v, want inode %d, change time %d, size %d", rec.Path, rec, st.Ino, st.Ctim.Nano(), st.Size)
		}
	}
	want := map[string]string{
		"sub":      `d 750 ""`,
		"sub/kept": `u 644 ""`,
		"old":      `u 644 ""`,
		"new":      `f 600 "new-body"`,
		"target":   `f 644 "moved-body"`,
		"link":     `o 0 ""`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// 0 asks for every content.
	buf.Reset()
	if err := writeTree(context.Background(), &buf, dir, 0); err != nil {
		t.Fatal(err)
	}
	r = tree.NewReader(&buf)
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if rec.Kind == tree.KindUnchanged {
			t.Fatalf("%s unchanged with no time asked", rec.Path)
		}
	}
}
