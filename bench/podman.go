package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// Podman runs one-shot containers on a root filesystem directory.
type Podman struct {
	Binary string // default "podman"
}

// Run runs args in a fresh container on rootfs and removes it afterwards.
// The rootfs is given with podman's ":O" overlay suffix: without it podman
// writes /etc/hosts, /etc/hostname and mount points into the directory
// (even with --read-only), and that directory is a shared, content-addressed
// image layer that must never change.
func (p Podman) Run(ctx context.Context, rootfs string, args ...string) error {
	if !filepath.IsAbs(rootfs) || strings.ContainsAny(rootfs, ":,") {
		return fmt.Errorf("podman rootfs %q must be an absolute path without ':' or ','", rootfs)
	}
	bin := p.Binary
	if bin == "" {
		bin = "podman"
	}
	// podman picks crun when it is installed, and crun refuses this kind of
	// host's hybrid cgroup layout; runc is also what Paddock is compared on.
	a := []string{"--runtime", "runc", "run", "--rm",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--network", "none", "--rootfs", rootfs + ":O"}
	_, err := runTool(ctx, bin, append(a, args...)...)
	return err
}
