package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/paddock-dev/paddock/internal/tarsafe"
)

const maxIndexDepth = 4

// openLayout unpacks the OCI layout in archive into dir and opens the image
// it holds (for a multi-platform index, the linux one for this machine).
// Only index.json, oci-layout and blobs/sha256/<hex> are taken, as plain
// files: the layout's own tar is as untrusted as its layers.
func openLayout(archive, dir string) (v1.Image, v1.Hash, string, bool, error) {
	if err := unpackLayoutFiles(archive, dir); err != nil {
		return nil, v1.Hash{}, "", false, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, v1.Hash{}, "", false, badImage("OCI layout: %v", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, v1.Hash{}, "", false, badImage("OCI layout index: %v", err)
	}
	img, d, tag, err := pickImage(idx, 0)
	if err != nil {
		return nil, v1.Hash{}, "", false, err
	}
	return img, d, tag, true, nil
}

func pickImage(idx v1.ImageIndex, depth int) (v1.Image, v1.Hash, string, error) {
	if depth > maxIndexDepth {
		return nil, v1.Hash{}, "", badImage("OCI index nested deeper than %d", maxIndexDepth)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, "", badImage("OCI index: %v", err)
	}
	var chosen *v1.Descriptor
	for i := range m.Manifests {
		d := &m.Manifests[i]
		if !d.MediaType.IsImage() && !d.MediaType.IsIndex() {
			continue
		}
		if d.Platform != nil && (d.Platform.OS != "linux" || d.Platform.Architecture != goruntime.GOARCH) {
			continue
		}
		if chosen != nil {
			return nil, v1.Hash{}, "", badImage("OCI layout holds more than one image; import one at a time")
		}
		chosen = d
	}
	if chosen == nil {
		return nil, v1.Hash{}, "", badImage("OCI layout holds no image for linux/%s", goruntime.GOARCH)
	}
	tag := chosen.Annotations["org.opencontainers.image.ref.name"]
	if chosen.MediaType.IsIndex() {
		child, err := idx.ImageIndex(chosen.Digest)
		if err != nil {
			return nil, v1.Hash{}, "", badImage("OCI index %s: %v", chosen.Digest, err)
		}
		img, d, t, err := pickImage(child, depth+1)
		if t == "" {
			t = tag
		}
		return img, d, t, err
	}
	img, err := idx.Image(chosen.Digest)
	if err != nil {
		return nil, v1.Hash{}, "", badImage("OCI image %s: %v", chosen.Digest, err)
	}
	return img, chosen.Digest, tag, nil
}

func unpackLayoutFiles(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return badImage("archive is not a readable tar: %v", err)
		}
		if tarsafe.Sparse(h) {
			return badImage("archive entry %q is a sparse file; sparse entries are not supported", printable(h.Name))
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		n := strings.TrimPrefix(h.Name, "./")
		switch {
		case n == "index.json" || n == "oci-layout":
		case strings.HasPrefix(n, "blobs/sha256/") && validHex(strings.TrimPrefix(n, "blobs/sha256/")):
		default:
			continue
		}
		// Names were checked against a fixed shape above, so the join
		// cannot leave dir.
		out, err := os.OpenFile(filepath.Join(dir, n), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("OCI layout: %w", err)
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("OCI layout: %w", err)
		}
	}
}
