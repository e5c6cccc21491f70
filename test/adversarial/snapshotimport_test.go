package adversarial

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/tarsafe/tarsafetest"
	"github.com/paddock-dev/paddock/sdk/go/paddock"
)

// sparsePDK is a snapshot file whose one layer holds a sparse entry of
// size bytes with one byte of data; its checksums are all truthful.
func sparsePDK(t *testing.T, imageDigest string, size int64) []byte {
	t.Helper()
	layer := append(tarsafetest.PAXSparse("big", size, []byte("x")), tarsafetest.End()...)
	sum := sha256.Sum256(layer)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	m, err := json.Marshal(map[string]any{
		"format": "paddock-snapshot/v1", "image": "busybox", "image_digest": imageDigest,
		"created_at": time.Unix(1_700_000_000, 0).UTC(), "layers": []map[string]any{{"digest": digest, "size": len(layer)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", m}, {"layers/" + strings.TrimPrefix(digest, "sha256:") + ".tar", layer}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSnapshotImportBounds, through the real daemon and two API keys of
// scope own: a snapshot file of a few KiB holding a 1 GiB sparse entry is
// a 400 that never writes the expanded bytes; and while key a's import
// trickles in, key b's snapshot create finishes at once instead of
// waiting for the upload, which then completes.
func TestSnapshotImportBounds(t *testing.T) {
	d := startDaemon(t, daemonOpts{listen: true})
	a := newTenant(t, d, uniqueName("snapimp-a"), api.KeyScopeOwn)
	b := newTenant(t, d, uniqueName("snapimp-b"), api.KeyScopeOwn)
	ctx := ctxT(t, 5*time.Minute)

	sb, err := b.sdk.Create(ctx, api.CreateSandboxRequest{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.client.Delete(ctxT(t, time.Minute), sb.ID) })
	if res, err := b.sdk.Exec(ctx, sb.ID, paddock.ExecOptions{Cmd: []string{"sh", "-c", "head -c 300000 /dev/urandom > /home/user/data"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("write a file: %v %+v", err, res)
	}
	start := time.Now()
	seed, err := b.sdk.CreateSnapshot(ctx, sb.ID, api.CreateSnapshotRequest{Name: uniqueName("seed")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a snapshot create alone takes %s", time.Since(start))
	var file bytes.Buffer
	if err := b.sdk.ExportSnapshot(ctx, seed.ID, &file); err != nil {
		t.Fatal(err)
	}

	// Sparse: refused, the store never holds the expanded bytes.
	pdk := sparsePDK(t, seed.ImageDigest, 1<<30)
	stop := tarsafetest.WatchUsage(filepath.Join(d.stateDir, "snapshots"))
	_, err = a.sdk.ImportSnapshot(ctx, bytes.NewReader(pdk), paddock.ImportOptions{})
	peak := stop()
	var ae *paddock.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "sparse") {
		t.Fatalf("sparse snapshot file: %v", err)
	}
	t.Logf("sparse file of %d bytes: %d %q; snapshot store peak %d bytes", len(pdk), ae.Status, ae.Message, peak)
	if peak > 4<<20+int64(file.Len())*4 {
		t.Fatalf("the snapshot store grew to %d bytes during a refused sparse import", peak)
	}

	// A trickling import by a holds up no snapshot of b's.
	pr, pw := io.Pipe()
	imported := make(chan error, 1)
	name := uniqueName("slow")
	go func() {
		_, err := a.sdk.ImportSnapshot(ctx, pr, paddock.ImportOptions{Name: name})
		imported <- err
	}()
	data := file.Bytes()
	half := len(data) / 2
	if _, err := pw.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the daemon is now waiting for the rest
	created := make(chan error, 1)
	start = time.Now()
	go func() {
		_, err := b.sdk.CreateSnapshot(ctx, sb.ID, api.CreateSnapshotRequest{Name: uniqueName("during")})
		created <- err
	}()
	select {
	case err := <-created:
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("key b's snapshot create took %s while key a's import waited for its client", took)
		if took > 5*time.Second {
			t.Fatalf("key b's snapshot create took %s during key a's import", took)
		}
	case <-time.After(30 * time.Second):
		pw.CloseWithError(errors.New("test gave up"))
		<-imported
		t.Fatal("key b's snapshot create waited 30s behind key a's unfinished import")
	}
	select {
	case err := <-imported:
		t.Fatalf("the import ended before its file did: %v", err)
	default:
	}
	if _, err := pw.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-imported; err != nil {
		t.Fatalf("the slow import: %v", err)
	}
	if _, err := a.sdk.GetSnapshot(ctx, name); err != nil {
		t.Fatalf("the imported snapshot: %v", err)
	}
}
