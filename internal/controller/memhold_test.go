package controller

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock/internal/config"
)

// TestHoldMemory: the collector removes the memory image of a deleted
// snapshot at once unless a create holds it; a held one outlives the
// collection and goes with the last release, and one still recorded is
// never removed.
func TestHoldMemory(t *testing.T) {
	c := &Controller{cfg: config.Config{StateDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, id := range []string{"deleted", "held", "kept"} {
		if err := os.MkdirAll(filepath.Join(c.snapshotMemoryDir(id), "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(id string) bool {
		_, err := os.Stat(c.snapshotMemoryDir(id))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}
	first, second := c.holdMemory("held"), c.holdMemory("held")
	keptHold := c.holdMemory("kept")
	collect := func() {
		c.snaps.mu.Lock()
		defer c.snaps.mu.Unlock()
		c.collectMemoryImages(map[string]bool{"kept": true})
	}
	collect()
	if exists("deleted") || !exists("held") || !exists("kept") {
		t.Fatalf("after collection: deleted %v held %v kept %v; want only the unheld deleted one gone", exists("deleted"), exists("held"), exists("kept"))
	}
	first()
	first() // a release is idempotent
	if !exists("held") {
		t.Fatal("removed while a second create still holds it")
	}
	second()
	if exists("held") {
		t.Error("the last release left the image of a deleted snapshot")
	}
	keptHold()
	if !exists("kept") {
		t.Error("a release removed the image of a recorded snapshot")
	}
	if len(c.snaps.memHeld) != 0 || len(c.snaps.memOrphaned) != 0 {
		t.Errorf("bookkeeping left: held %v orphaned %v", c.snaps.memHeld, c.snaps.memOrphaned)
	}
}
