package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// sealBinary copies the running executable to dir/paddock-<sha256 prefix>,
// read-only, and returns its path. Sandboxes get that copy bind-mounted
// read-only as their agent: never the live binary, which a container could
// otherwise overwrite through /proc/self/exe (runc CVE-2019-5736's lesson).
func sealBinary(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	src, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".paddock-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "paddock-"+hex.EncodeToString(h.Sum(nil))[:24])
	if fi, err := os.Stat(dst); err == nil && fi.Mode().IsRegular() {
		return dst, nil // the same binary was sealed before
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("install sealed binary: %w", err)
	}
	return dst, nil
}
