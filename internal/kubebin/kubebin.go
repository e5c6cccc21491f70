// Package kubebin holds the daemon with the Kubernetes backend linked in
// (cmd/paddock-kubernetes), which release builds embed in the paddock
// binary, gzip-compressed, so that Paddock stays one file while its other
// commands do not start the cluster's client libraries (about 30 ms of
// package initialisation and 30 MB of binary at every start).
//
// scripts/build.sh (behind `make build`) builds cmd/paddock-kubernetes,
// writes it here as paddock-kubernetes.gz and builds cmd/paddock with the
// build tag embedkube. `paddock serve --backend kubernetes` then writes it
// out once, read-only, under the daemon's state directory, and replaces
// itself with it (same process, arguments and environment). A build
// without the tag embeds nothing and runs a paddock-kubernetes found
// beside its own executable.
package kubebin

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paddock-dev/paddock/internal/sealfile"
)

// Name is the binary's name, beside paddock or written out by Path.
const Name = "paddock-kubernetes"

// ErrMissing says this build has no Kubernetes daemon to run.
var ErrMissing = errors.New("this paddock build has no Kubernetes backend: build it with `make build` (scripts/build.sh), or build ./cmd/paddock-kubernetes and put it beside paddock")

// Path returns the Kubernetes daemon to run: the embedded one, written to
// dir/paddock-kubernetes-<sha256 prefix of its compressed bytes> read-only
// (once: a later call finds it), or else paddock-kubernetes beside the
// running executable.
func Path(dir string) (string, error) {
	if len(compressed) == 0 {
		return beside()
	}
	sum := sha256.Sum256(compressed)
	dst := filepath.Join(dir, Name+"-"+hex.EncodeToString(sum[:])[:24])
	if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() {
		return dst, nil // written out before
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return "", fmt.Errorf("embedded %s: %w", Name, err)
	}
	tmp, err := os.CreateTemp(dir, ".paddock-kubernetes-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, zr); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %s: %w", Name, err)
	}
	if err := zr.Close(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("embedded %s: %w", Name, err)
	}
	return sealfile.Install(tmp, dst)
}

func beside() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), Name)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", ErrMissing
	}
	return p, nil
}

// Exec replaces the running process with the Kubernetes daemon (Path of
// dir), given args (without the program's name) and this environment. It
// returns only on failure.
func Exec(dir string, args []string) error {
	p, err := Path(dir)
	if err != nil {
		return err
	}
	argv := append([]string{p}, args...)
	if err := syscall.Exec(p, argv, os.Environ()); err != nil {
		return fmt.Errorf("run %s: %w", p, err)
	}
	return nil
}
