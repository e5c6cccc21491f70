package image

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExportOCIRoundTrip exports a layer holding a file, an overlayfs
// whiteout and an opaque directory, and reads the archive back as an OCI
// layout: the image's layer spells the whiteouts OCI's way, the agent is a
// layer of its own, and the entrypoint runs it on TCP.
func TestExportOCIRoundTrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("whiteouts are character devices and trusted xattrs: needs root")
	}
	dir := t.TempDir()
	layer := filepath.Join(dir, "layer")
	for _, d := range []string{layer, filepath.Join(layer, "etc"), filepath.Join(layer, "opaque")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(layer, "etc", "hello"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(layer, "etc", "gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(layer, "opaque"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	agentBin := filepath.Join(dir, "agent")
	if err := os.WriteFile(agentBin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := &Image{Name: "docker.io/Library/Python:3.12", Digest: "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Layers: []string{layer}}
	agentID, err := AgentID(agentBin)
	if err != nil || len(agentID) != 64 {
		t.Fatalf("AgentID = %q, %v", agentID, err)
	}
	ref := OCIRef("paddock.local/", img, agentID)
	if want := "paddock.local/docker-io-library-python-3-12:0123456789abcdef0123456789abcdef-" + agentID[:12]; ref != want {
		t.Fatalf("OCIRef = %q, want %q", ref, want)
	}
	if other := OCIRef("paddock.local", img, strings.Repeat("f", 64)); other == ref || !strings.HasSuffix(other, "-ffffffffffff") {
		t.Errorf("another agent's reference: %q (this one's %q)", other, ref)
	}
	archive := filepath.Join(dir, "image.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := ExportOCI(context.Background(), img, OCIExport{Ref: ref, AgentBinary: agentBin, TempDir: dir}, f); err != nil {
		t.Fatal(err)
	}
	f.Close()

	got, _, tag, ok, err := openLayout(archive, filepath.Join(dir, "unpacked"))
	if err != nil || !ok {
		t.Fatalf("openLayout: %v %v", ok, err)
	}
	if tag != ref {
		t.Errorf("reference in the archive = %q, want %q", tag, ref)
	}
	cfg, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{AgentPathInImage, "agent", "--listen", ":49983"}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("entrypoint = %q", cfg.Config.Entrypoint)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	names := func(i int) map[string]*tar.Header {
		rc, err := layers[i].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		out := map[string]*tar.Header{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = h
		}
	}
	l0 := names(0)
	for _, n := range []string{"etc/hello", "etc/.wh.gone", "opaque/", "opaque/.wh..wh..opq"} {
		if l0[n] == nil {
			t.Errorf("layer 0 lacks %s: %v", n, l0)
		}
	}
	if h := l0["opaque/"]; h != nil && h.PAXRecords["SCHILY.xattr.trusted.overlay.opaque"] != "" {
		t.Errorf("the overlay xattr leaked into the OCI layer")
	}
	if l0["etc/gone"] != nil {
		t.Errorf("the whiteout stayed a device node")
	}
	if h := names(1)["/"[1:]+AgentPathInImage[1:]]; h == nil || h.Mode != 0o555 || h.Uid != 0 {
		t.Errorf("agent layer entry: %+v", h)
	}
}
