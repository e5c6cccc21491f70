package controller

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/snapshot"
)

// TestSnapshotImportHoldsNoLockWhileReading: while one key's import is
// waiting for the rest of a slowly sent file, another caller's snapshot
// work that takes the snapshot lock (a delete and its layer collection)
// finishes at once; the import then completes from what it staged.
func TestSnapshotImportHoldsNoLockWhileReading(t *testing.T) {
	ctx := System(context.Background())
	c, ss := newLeaseController(t)
	src := snapshotOf(t, c, ss, "src", strings.Repeat("payload ", 4096))
	var file bytes.Buffer
	m := snapshot.Manifest{ImageDigest: src.ImageDigest, Image: "busybox", CreatedAt: time.Unix(1_700_000_000, 0).UTC()}
	for _, l := range src.Layers {
		m.Layers = append(m.Layers, snapshot.Layer{Digest: l.Digest})
	}
	if err := ss.Export(ctx, m, "", &file); err != nil {
		t.Fatal(err)
	}
	snapshotOf(t, c, ss, "other", "another owner's files")

	pr, pw := io.Pipe()
	imported := make(chan error, 1)
	go func() {
		_, err := c.ImportSnapshot(WithCaller(ctx, "key-a", "own"), pr, ImportOptions{Name: "slow"})
		imported <- err
	}()
	data := file.Bytes()
	half := len(data) / 2
	if _, err := pw.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	// The import has read half the file and waits for the rest.
	deleted := make(chan error, 1)
	start := time.Now()
	go func() { deleted <- c.DeleteSnapshot(ctx, "other") }()
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("delete and collection took %s while the import waited", time.Since(start))
	case <-time.After(3 * time.Second):
		pw.CloseWithError(errors.New("test gave up"))
		<-imported
		t.Fatal("another owner's snapshot work waited for an import still reading its client")
	}
	if _, err := pw.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-imported; err != nil {
		t.Fatalf("import: %v", err)
	}
	named, err := c.opts.Store.SnapshotsByName(ctx, "slow")
	if err != nil || len(named) != 1 {
		t.Fatalf("imported snapshot: %v, %d named slow", err, len(named))
	}
	got := named[0]
	if len(got.Layers) != 1 || got.Layers[0].Digest != src.Layers[0].Digest || got.Owner != "key-a" {
		t.Fatalf("imported snapshot: %+v", got)
	}
}
