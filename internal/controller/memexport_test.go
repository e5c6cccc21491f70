package controller

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/memimage"
	"github.com/paddock-dev/paddock/internal/store"
)

// TestMemoryImportNeedsTheKey: an exported memory image is kept by an
// import only under the key that sealed it; with another key it is
// refused naming the key file, and files_only takes the files alone.
// (This controller has no gVisor, so even the right key ends at the
// runtime check, after the seal passed; the e2e suite restores one.)
func TestMemoryImportNeedsTheKey(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newLeaseController(t)
	files := snapshotOf(t, c, ss, "files", "home")
	snap := *files
	snap.ID, snap.Name = newID(), "warm"
	dir := c.snapshotMemoryDir(snap.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pages.img"), bytes.Repeat([]byte("p"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	im, err := memimage.Seal(dir, "runsc test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	snap.Memory = &store.SnapshotMemory{Runtime: "gvisor", Format: "runsc test", Bytes: im.Bytes()}
	if err := c.opts.Store.CreateSnapshot(ctx, &snap); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if err := c.ExportSnapshot(ctx, "warm", &file); err != nil {
		t.Fatal(err)
	}
	data := file.Bytes()
	importAs := func(name string, filesOnly bool) error {
		_, err := c.ImportSnapshot(ctx, bytes.NewReader(data), ImportOptions{Name: name, FilesOnly: filesOnly})
		return err
	}

	// Sealed under this daemon's key: the seal passes, and the import
	// stops only at the runtime this controller lacks.
	if err := importAs("same", false); err == nil || strings.Contains(err.Error(), MemoryKeyFile) || !strings.Contains(err.Error(), "files_only") {
		t.Errorf("import under the sealing key = %v; want past the seal, refused by the runtime with the files_only hint", err)
	}
	// Another key.
	key := filepath.Join(c.cfg.StateDir, MemoryKeyFile)
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := importAs("foreign", false); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), MemoryKeyFile) {
		t.Errorf("import under another key = %v; want a precondition failure naming %s", err, MemoryKeyFile)
	}
	if err := importAs("files-only", true); err != nil {
		t.Fatalf("files-only import: %v", err)
	}
	got, err := c.GetSnapshot(ctx, "files-only")
	if err != nil || got.Memory || len(got.Layers) != 1 || got.Layers[0] != files.Layers[0].Digest {
		t.Errorf("files-only import = %+v, %v", got, err)
	}
	if ents, _ := os.ReadDir(c.memoryImportDir()); len(ents) != 0 {
		t.Errorf("%d staged memory images left", len(ents))
	}
	// A key file too short to be one is refused, not used.
	if err := os.WriteFile(key, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.ExportSnapshot(ctx, "warm", &bytes.Buffer{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("export with a short key = %v", err)
	}
}
