package admission

import (
	"fmt"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// sizePreset is one named size. Disk sizes named "GB" in the presets'
// public table are given in GiB, so a preset never gives less than its
// name promises.
type sizePreset struct {
	name string
	res  api.Resources
}

// sizePresets are ordered smallest first; "at most size X" compares fields.
var sizePresets = []sizePreset{
	{api.SizeLite, api.Resources{CPU: 0.0625, MemoryMB: 256, DiskMB: 2 << 10, Pids: 256}},
	{api.SizeBasic, api.Resources{CPU: 0.25, MemoryMB: 1 << 10, DiskMB: 4 << 10, Pids: 512}},
	{api.SizeStandard1, api.Resources{CPU: 0.5, MemoryMB: 4 << 10, DiskMB: 8 << 10, Pids: 1024}},
	{api.SizeStandard2, api.Resources{CPU: 1, MemoryMB: 6 << 10, DiskMB: 12 << 10, Pids: 2048}},
	{api.SizeStandard3, api.Resources{CPU: 2, MemoryMB: 8 << 10, DiskMB: 16 << 10, Pids: 4096}},
	{api.SizeStandard4, api.Resources{CPU: 4, MemoryMB: 12 << 10, DiskMB: 20 << 10, Pids: 8192}},
}

func sizeNames() []string {
	names := make([]string, len(sizePresets))
	for i, p := range sizePresets {
		names[i] = p.name
	}
	return names
}

// LookupSize finds a preset by name.
func LookupSize(name string) (api.Resources, error) {
	for _, p := range sizePresets {
		if p.name == name {
			return p.res, nil
		}
	}
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	return api.Resources{}, errdefs.Invalid("size %q is not a preset (want one of %s, or give resources)", name, strings.Join(sizeNames(), ", "))
}

// WithSize fills the fields of req the caller left zero from the preset
// named size.
func WithSize(size string, req api.Resources) (api.Resources, error) {
	preset, err := LookupSize(size)
	if err != nil {
		return api.Resources{}, err
	}
	return Fill(req, preset), nil
}

// Fill gives each zero field of r the value of the same field of from.
func Fill(r, from api.Resources) api.Resources {
	if r.CPU == 0 {
		r.CPU = from.CPU
	}
	if r.MemoryMB == 0 {
		r.MemoryMB = from.MemoryMB
	}
	if r.DiskMB == 0 {
		r.DiskMB = from.DiskMB
	}
	if r.Pids == 0 {
		r.Pids = from.Pids
	}
	return r
}

// ExceedsHost says, with the numbers, which field of r is more than max
// allows, or "" when r fits.
func ExceedsHost(r, max api.Resources) string {
	switch {
	case r.CPU > max.CPU:
		return fmt.Sprintf("%g vCPUs requested, this host allows %g", r.CPU, max.CPU)
	case r.MemoryMB > max.MemoryMB:
		return fmt.Sprintf("%d MiB of memory requested, this host allows %d MiB", r.MemoryMB, max.MemoryMB)
	case r.DiskMB > max.DiskMB:
		return fmt.Sprintf("%d MiB of disk requested, this host allows %d MiB", r.DiskMB, max.DiskMB)
	case r.Pids > max.Pids:
		return fmt.Sprintf("%d pids requested, this host allows %d", r.Pids, max.Pids)
	}
	return ""
}

// ExceedsLimit names the first field of r above limit (zero limit fields
// bound nothing), or "" when r is within it.
func ExceedsLimit(r, limit api.Resources) string {
	switch {
	case limit.CPU > 0 && r.CPU > limit.CPU:
		return fmt.Sprintf("cpu %g is above %g", r.CPU, limit.CPU)
	case limit.MemoryMB > 0 && r.MemoryMB > limit.MemoryMB:
		return fmt.Sprintf("memory %d MiB is above %d MiB", r.MemoryMB, limit.MemoryMB)
	case limit.DiskMB > 0 && r.DiskMB > limit.DiskMB:
		return fmt.Sprintf("disk %d MiB is above %d MiB", r.DiskMB, limit.DiskMB)
	case limit.Pids > 0 && r.Pids > limit.Pids:
		return fmt.Sprintf("pids %d is above %d", r.Pids, limit.Pids)
	}
	return ""
}

// SizeInfos lists the presets and whether each fits a host allowing max.
func SizeInfos(max api.Resources) []api.SizeInfo {
	out := make([]api.SizeInfo, 0, len(sizePresets))
	for _, p := range sizePresets {
		si := api.SizeInfo{Name: p.name, Resources: p.res, Fits: true}
		if why := ExceedsHost(p.res, max); why != "" {
			si.Fits, si.Reason = false, why
		}
		out = append(out, si)
	}
	return out
}
