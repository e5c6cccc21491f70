package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// Bounds on what a Spec may ask for. They are sanity limits, well above
// what any admission policy grants, that keep a bad value from reaching
// the kernel or the disk.
const (
	maxIDLen       = 32
	maxLayers      = 128
	maxEnv         = 4096
	maxEnvBytes    = 1 << 20
	minMemoryBytes = 8 << 20
	maxMemoryBytes = 1 << 40
	minDiskBytes   = 16 << 20
	maxDiskBytes   = 16 << 40
	maxCPUMillis   = 1024 * 1000
	maxPids        = 1 << 22
	// maxOverlayOpts is below the page size the kernel copies mount data
	// into; longer lowerdir lists fail with a confusing EINVAL.
	maxOverlayOpts = 4000
)

// validID reports whether id matches [a-z0-9]{1,32}.
func validID(id string) bool {
	if len(id) == 0 || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func checkID(id string) error {
	if !validID(id) {
		return errdefs.Invalid("invalid sandbox id %q: want 1 to 32 of [a-z0-9]", truncate(id, 40))
	}
	return nil
}

// validCgroupName accepts a relative cgroup path of simple components.
func validCgroupName(s string) bool {
	if s == "" || len(s) > 128 || strings.HasPrefix(s, "/") {
		return false
	}
	for _, part := range strings.Split(s, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
		for _, c := range part {
			ok := c == '-' || c == '_' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
			if !ok {
				return false
			}
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// validateSpec checks everything in a Spec that comes from outside before
// any of it touches the filesystem.
func validateSpec(spec runtime.Spec) error {
	if err := checkID(spec.ID); err != nil {
		return err
	}
	if len(spec.Layers) == 0 || len(spec.Layers) > maxLayers {
		return errdefs.Invalid("sandbox needs 1 to %d image layers, got %d", maxLayers, len(spec.Layers))
	}
	for _, l := range spec.Layers {
		if err := checkHostDir(l); err != nil {
			return err
		}
	}
	if err := checkAgentBinary(spec.AgentBinary); err != nil {
		return err
	}
	if len(spec.AllEnv()) > maxEnv {
		return errdefs.Invalid("too many environment variables (%d, max %d)", len(spec.AllEnv()), maxEnv)
	}
	total := 0
	for _, kv := range spec.AllEnv() {
		total += len(kv)
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return errdefs.Invalid("invalid environment entry %q: want KEY=VALUE", truncate(kv, 40))
		}
	}
	if total > maxEnvBytes {
		return errdefs.Invalid("environment too large (%d bytes, max %d)", total, maxEnvBytes)
	}
	return validateResources(spec.Resources)
}

func validateResources(res runtime.Resources) error {
	type bound struct {
		name          string
		v, min, max   int64
		zeroIsAllowed bool
	}
	for _, b := range []bound{
		{"cpu millis", res.CPUMillis, 1, maxCPUMillis, false},
		{"memory bytes", res.MemoryBytes, minMemoryBytes, maxMemoryBytes, false},
		{"disk bytes", res.DiskBytes, minDiskBytes, maxDiskBytes, false},
		{"pids", res.Pids, 1, maxPids, true},
	} {
		if b.v == 0 && b.zeroIsAllowed {
			continue
		}
		if b.v < b.min || b.v > b.max {
			return errdefs.Invalid("%s %d out of range [%d, %d]", b.name, b.v, b.min, b.max)
		}
	}
	return nil
}

// checkHostDir validates an image layer path: absolute, clean, a real
// directory, and free of the characters overlayfs uses as separators.
func checkHostDir(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return errdefs.Invalid("layer path %q must be absolute and clean", truncate(p, 80))
	}
	if strings.ContainsAny(p, ":,\\\x00\n") {
		return errdefs.Invalid("layer path %q contains a character overlayfs cannot take", truncate(p, 80))
	}
	st, err := os.Lstat(p)
	if err != nil || !st.IsDir() {
		return errdefs.Invalid("layer %q is not a directory", truncate(p, 80))
	}
	return nil
}

func checkAgentBinary(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsAny(p, ",\x00\n") {
		return errdefs.Invalid("agent binary path %q must be absolute and clean", truncate(p, 80))
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("agent binary %q: %w", truncate(p, 80), errdefs.ErrInvalidArgument)
	}
	if !st.Mode().IsRegular() {
		return errdefs.Invalid("agent binary %q is not a regular file", truncate(p, 80))
	}
	return nil
}
