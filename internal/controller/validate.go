package controller

import (
	"fmt"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/admission"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// Sandbox ids are 20 characters of [a-z0-9]: valid as a hostname, a path
// element, a cgroup name and an E2B sandbox id (no '-').
const idLen = 20

var (
	idRE = lazyre.New(`^[a-z0-9]{1,32}$`)
	// Label keys follow Kubernetes' shape loosely: short, no '=' or ','.
	labelKeyRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_./-]{0,62}$`)
)

const (
	maxLabels     = 64
	maxLabelValue = 256
)

func newID() string { return rules.RandomID(idLen) }

// validRef reports whether s can be a sandbox id or name at all; anything
// else is refused before it reaches the store.
func validRef(s string) bool { return idRE.MatchString(s) || rules.ValidName(s) }

func validateName(name string) error {
	if name == "" {
		return nil
	}
	if !rules.ValidName(name) {
		return errdefs.Invalid("name %q: use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit", name)
	}
	return nil
}

func validateLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return errdefs.Invalid("too many labels (%d, at most %d)", len(labels), maxLabels)
	}
	for k, v := range labels {
		if !labelKeyRE.MatchString(k) {
			return errdefs.Invalid("label key %q is not valid", k)
		}
		if len(v) > maxLabelValue || strings.ContainsAny(v, "\x00\n") {
			return errdefs.Invalid("label %s: value too long or contains NUL/newline", k)
		}
	}
	return nil
}

// resolveResources fills unset fields from defaults and refuses, with the
// numbers, anything non-positive or above the maximum: never silently reduced.
func resolveResources(req, def, max api.Resources) (api.Resources, error) {
	r := req
	if r.CPU < 0 || r.MemoryMB < 0 || r.DiskMB < 0 || r.Pids < 0 {
		return r, errdefs.Invalid("resources must not be negative (cpu=%g memory_mb=%d disk_mb=%d pids=%d)", r.CPU, r.MemoryMB, r.DiskMB, r.Pids)
	}
	r = admission.Fill(r, def)
	switch {
	case r.CPU > max.CPU:
		return r, fmt.Errorf("cpu %g is more than this host allows (%g): %w", r.CPU, max.CPU, errdefs.ErrResourceExhausted)
	case r.CPU < 0.01:
		return r, errdefs.Invalid("cpu %g is below the minimum of 0.01", r.CPU)
	case r.MemoryMB > max.MemoryMB:
		return r, fmt.Errorf("memory %d MiB is more than this host allows (%d MiB): %w", r.MemoryMB, max.MemoryMB, errdefs.ErrResourceExhausted)
	case r.MemoryMB < 16:
		return r, errdefs.Invalid("memory %d MiB is below the minimum of 16 MiB", r.MemoryMB)
	case r.DiskMB > max.DiskMB:
		return r, fmt.Errorf("disk %d MiB is more than this host allows (%d MiB): %w", r.DiskMB, max.DiskMB, errdefs.ErrResourceExhausted)
	case r.DiskMB < 64:
		return r, errdefs.Invalid("disk %d MiB is below the minimum of 64 MiB", r.DiskMB)
	case r.Pids > max.Pids:
		return r, fmt.Errorf("pids %d is more than this host allows (%d): %w", r.Pids, max.Pids, errdefs.ErrResourceExhausted)
	case r.Pids < 8:
		return r, errdefs.Invalid("pids %d is below the minimum of 8", r.Pids)
	}
	return r, nil
}
