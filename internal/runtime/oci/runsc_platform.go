package oci

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// gVisor platforms Options.Platform accepts ("" chooses).
const (
	PlatformSystrap = "systrap"
	PlatformPtrace  = "ptrace"
)

// runscFeatures is what a runsc binary can do that releases differ in.
type runscFeatures struct {
	// platforms are the --platform values it has.
	platforms []string
	// cgroupV2Inside: it has --in-sandbox-cgroup=v2, a cgroup v2 tree
	// inside the sentry whose pids.max it enforces (runsc_pids.go).
	cgroupV2Inside bool
}

// probeRunsc reads a runsc binary's features from `runsc flags`: the
// platforms its --platform help names (`runsc platforms` exists in the
// source but is not a command of the binary) and whether it has
// --in-sandbox-cgroup. Debian's runsc (20221219) says "ptrace (default),
// kvm" and has no such flag; the pinned build says "systrap (default),
// ptrace, kvm" and has it. Where the help cannot be read, ptrace, which
// every release has, is assumed, and nothing else.
func probeRunsc(ctx context.Context, bin string) runscFeatures {
	out, _ := exec.CommandContext(ctx, bin, "flags").CombinedOutput()
	f := runscFeatures{platforms: parsePlatformHelp(string(out))}
	if len(f.platforms) == 0 {
		f.platforms = []string{PlatformPtrace}
	}
	f.cgroupV2Inside = strings.Contains(string(out), "-in-sandbox-cgroup ")
	return f
}

// parsePlatformHelp reads the platform names out of `runsc flags`.
func parsePlatformHelp(flags string) []string {
	const marker = "specifies which platform to use:"
	i := strings.Index(flags, marker)
	if i < 0 {
		return nil
	}
	list := flags[i+len(marker):]
	if j := strings.IndexAny(list, ".\n"); j >= 0 {
		list = list[:j]
	}
	var out []string
	for _, f := range strings.Split(list, ",") {
		name := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "(default)"))
		if name != "" && len(name) <= 32 && !strings.ContainsAny(name, " \t") {
			out = append(out, name)
		}
	}
	return out
}

// choosePlatform picks the gVisor platform: the one asked for, which the
// binary must have, or else systrap where it exists (faster here, see
// docs/runtimes.md) and ptrace otherwise.
func choosePlatform(want string, have []string) (string, error) {
	has := func(p string) bool {
		for _, h := range have {
			if h == p {
				return true
			}
		}
		return false
	}
	switch want {
	case "":
		if has(PlatformSystrap) {
			return PlatformSystrap, nil
		}
		return PlatformPtrace, nil
	case PlatformSystrap, PlatformPtrace:
		if !has(want) {
			return "", fmt.Errorf("oci: this runsc has no %s platform (it has %s): %w", want, strings.Join(have, ", "), errdefs.ErrUnavailable)
		}
		return want, nil
	default:
		return "", errdefs.Invalid("oci: unknown gVisor platform %q (want systrap or ptrace)", want)
	}
}
