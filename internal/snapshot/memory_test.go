package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// memoryFiles writes files into a new directory and lists them.
func memoryFiles(t *testing.T, files map[string]string) (string, []MemoryFile) {
	t.Helper()
	dir := t.TempDir()
	var out []MemoryFile
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(content))
		out = append(out, MemoryFile{Name: name, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])})
	}
	return dir, out
}

// TestExportImportMemory: a memory image's files travel after the layers
// and come out byte for byte in the importer's directory; a changed,
// oversized or misnamed memory file is refused and nothing of it kept.
func TestExportImportMemory(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	src := makeTree(t)
	os.Remove(filepath.Join(src, "fifo"))
	from := newStore(t)
	l := commitTree(t, from, src)
	pages := strings.Repeat("page", 4096)
	memDir, files := memoryFiles(t, map[string]string{"checkpoint.img": "kernel state", "pages.img": pages})
	m := Manifest{Image: "busybox", ImageDigest: "sha256:" + strings.Repeat("ab", 32), CreatedAt: time.Unix(1_700_000_000, 0).UTC(),
		Layers: []Layer{{Digest: l.Digest}}, Memory: &MemoryImage{Meta: []byte(`{"runtime":"gvisor"}`), Files: files, Seal: "s"}}
	var file bytes.Buffer
	if err := from.Export(ctx, m, memDir, &file); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()

	stageInto := func(data []byte, lim Limits) (string, *Staged, error) {
		dir := t.TempDir()
		st, err := newStore(t).Stage(ctx, bytes.NewReader(data), lim, dir)
		return dir, st, err
	}
	dir, st, err := stageInto(good, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Discard()
	if got := st.Manifest().Memory; got == nil || !strings.Contains(string(got.Meta), `"gvisor"`) || got.Seal != "s" || len(got.Files) != 2 {
		t.Fatalf("staged memory image %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "pages.img")); string(b) != pages {
		t.Errorf("pages.img staged as %d bytes, want %d", len(b), len(pages))
	}
	// Without a directory the files are checked and dropped.
	if st, err := newStore(t).Stage(ctx, bytes.NewReader(good), Limits{}, ""); err != nil {
		t.Errorf("stage without a memory directory: %v", err)
	} else {
		st.Discard()
	}

	off := bytes.Index(good, []byte("pagepage"))
	flipped := bytes.Clone(good)
	flipped[off] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
		lim  Limits
		want error
	}{
		{"changed", flipped, Limits{}, ErrChecksum},
		{"truncated", good[:off+100], Limits{}, errdefs.ErrInvalidArgument},
		{"over the bound", good, Limits{MaxBytes: int64(len(pages))}, errdefs.ErrResourceExhausted},
		{"path as name", bytes.Replace(bytes.Clone(good), []byte(`"name": "pages.img"`), []byte(`"name": "../x.img/"`), 1), Limits{}, errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, st, err := stageInto(tc.data, tc.lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("stage = %v, want %v", err, tc.want)
			}
			if st != nil {
				st.Discard()
			}
			// A refused memory file is never whole on disk: the check
			// fails as it ends, and the caller removes the directory.
			if b, err := os.ReadFile(filepath.Join(dir, "pages.img")); err == nil && string(b) == pages && tc.want == ErrChecksum {
				t.Errorf("a changed file was staged whole as the original")
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x.img")); err == nil {
				t.Error("a memory file name escaped the directory")
			}
		})
	}

	// A memory file that changed on disk is not exported under its hash.
	if err := os.WriteFile(filepath.Join(memDir, "pages.img"), []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := from.Export(ctx, m, memDir, &bytes.Buffer{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("export of a changed memory file = %v, want a precondition failure", err)
	}
}
