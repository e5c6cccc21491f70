package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LayerDir returns the read-only root filesystem directory of a
// single-layer image in an image store directory, from the image's digest
// as the API reports it. The digest comes from the daemon, so it is
// checked before it becomes part of a path.
func LayerDir(imagesDir, digest string) (string, error) {
	if !filepath.IsAbs(imagesDir) {
		return "", fmt.Errorf("images directory %q must be an absolute path", imagesDir)
	}
	hex, err := parseDigest(digest)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(imagesDir, "layers", "sha256", hex, "rootfs")
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("image layer of %s not found under %s: %w", digest, imagesDir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("image layer %s is not a directory", dir)
	}
	return dir, nil
}

// parseDigest accepts exactly "sha256:" and 64 lower-case hex digits.
func parseDigest(d string) (string, error) {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 {
		return "", fmt.Errorf("image digest %q: want sha256:<64 hex digits>", truncate(d, 80))
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("image digest %q: want sha256:<64 hex digits>", truncate(d, 80))
		}
	}
	return hex, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
