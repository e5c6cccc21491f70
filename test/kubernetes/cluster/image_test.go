package cluster

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteTestImages checks the archive is a valid OCI image layout: every
// blob named is present under its own digest, both images are named, and
// the layer holds busybox and its applet links.
func TestWriteTestImages(t *testing.T) {
	bb := "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		t.Skip("no /bin/busybox (busybox-static) on this host")
	}
	path := filepath.Join(t.TempDir(), "images.tar")
	if err := writeTestImages(path, bb); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
	blob := func(digest string) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("blob %s missing", digest)
		}
		if got := fmt.Sprintf("sha256:%x", sha256.Sum256(b)); got != digest {
			t.Fatalf("blob %s has digest %s", digest, got)
		}
		return b
	}
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q", files["oci-layout"])
	}
	type desc struct {
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	}
	var index struct {
		Manifests []desc `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range index.Manifests {
		names[m.Annotations["io.containerd.image.name"]] = true
		var man struct {
			Config desc   `json:"config"`
			Layers []desc `json:"layers"`
		}
		if err := json.Unmarshal(blob(m.Digest), &man); err != nil {
			t.Fatal(err)
		}
		blob(man.Config.Digest)
		if len(man.Layers) != 1 {
			t.Fatalf("%d layers, want 1", len(man.Layers))
		}
		layer := tar.NewReader(strings.NewReader(string(blob(man.Layers[0].Digest))))
		found := map[string]string{}
		for {
			h, err := layer.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			found[h.Name] = h.Linkname
		}
		if _, ok := found["bin/busybox"]; !ok || found["bin/sh"] != "busybox" || found["bin/sleep"] != "busybox" {
			t.Fatalf("layer lacks busybox or its sh/sleep links: %d entries", len(found))
		}
	}
	if !names[BusyboxImage] || !names[PauseImage] || len(names) != 2 {
		t.Fatalf("images named %v, want %s and %s", names, BusyboxImage, PauseImage)
	}
}
