// Package sealfile installs a program the daemon wrote out (the agent
// sandboxes run, the Kubernetes daemon) as a read-only file under a name
// of its content, so that a half-written file is never found by that
// name and one written before is used again.
package sealfile

import (
	"fmt"
	"os"
)

// Install makes tmp, a complete temporary file in dst's directory,
// read-only and durable, closes it and renames it to dst, unless a
// regular file dst exists already (the same content, by its name): then
// that one stays. The caller removes tmp's name afterwards (it is gone
// after a rename).
func Install(tmp *os.File, dst string) (string, error) {
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
	if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() {
		return dst, nil
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("install %s: %w", dst, err)
	}
	return dst, nil
}
