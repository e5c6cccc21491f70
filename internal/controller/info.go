package controller

import (
	"slices"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/admission"
)

// SetRuntimeProbes records what probing the runtimes found at daemon
// start, for Info. The daemon calls it once, before serving.
func (c *Controller) SetRuntimeProbes(runtimes []api.RuntimeInfo, cgroupLayout, version string) {
	c.adm.probeMu.Lock()
	defer c.adm.probeMu.Unlock()
	c.adm.runtimes = slices.Clone(runtimes)
	c.adm.layout = cgroupLayout
	c.adm.version = version
}

// Info says what this daemon offers: runtimes and why some are not usable,
// size presets and whether they fit, the host's limits and the defaults.
func (c *Controller) Info() api.Info {
	c.adm.probeMu.RLock()
	rts := slices.Clone(c.adm.runtimes)
	layout, version := c.adm.layout, c.adm.version
	c.adm.probeMu.RUnlock()
	if len(rts) == 0 {
		// Without probes (a controller built in a test), the wired
		// backends are what is known to work.
		for _, n := range c.Runtimes() {
			rts = append(rts, api.RuntimeInfo{Name: n, Available: true})
		}
	}
	for i := range rts {
		rts[i].Default = rts[i].Name == c.cfg.DefaultRuntime
	}
	c.adm.mu.RLock()
	active := c.adm.policy.Active()
	c.adm.mu.RUnlock()
	var firewall string
	if fn, ok := c.opts.Network.(FirewallNamer); ok {
		firewall = fn.Firewall()
	}
	return api.Info{
		Firewall: firewall,
		Version:  version,
		Runtimes: rts,
		Sizes:    admission.SizeInfos(c.cfg.Max),
		Limits:   c.cfg.Max,
		Defaults: api.InfoDefaults{
			Image:      c.cfg.DefaultImage,
			Runtime:    c.cfg.DefaultRuntime,
			Resources:  c.cfg.Defaults,
			SleepAfter: c.cfg.SleepAfter.String(),
		},
		CgroupLayout:  layout,
		PolicyActive:  active,
		SnapshotStore: c.storeUsage(),
	}
}
