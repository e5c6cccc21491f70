package config

import (
	"fmt"
	"math"
	goruntime "runtime"
	"strconv"
)

// Bounds on the limits below, so a typo cannot switch a protection off.
const (
	minRequestBodyMemory = 16 << 20
	maxDiskOvercommit    = 100
	maxCreatesPerCaller  = 1024
)

// applyLimitsEnv reads the host-protection settings.
func (c *Config) applyLimitsEnv(getenv func(string) string) error {
	if v := getenv("PADDOCK_REQUEST_BODY_MEMORY"); v != "" {
		n, err := ParseBytes(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_REQUEST_BODY_MEMORY: %w", err)
		}
		c.RequestBodyMemory = n
	}
	if v := getenv("PADDOCK_DISK_OVERCOMMIT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("PADDOCK_DISK_OVERCOMMIT: want a ratio such as 1 or 1.5")
		}
		c.DiskOvercommit = f
	}
	if v := getenv("PADDOCK_CREATES_PER_CALLER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("PADDOCK_CREATES_PER_CALLER: want a whole number such as 8")
		}
		c.CreatesPerCaller = n
	}
	return nil
}

func (c *Config) validateLimits() []error {
	var errs []error
	if c.RequestBodyMemory < minRequestBodyMemory {
		errs = append(errs, fmt.Errorf("request_body_memory %d: want at least %d (16 MiB)", c.RequestBodyMemory, minRequestBodyMemory))
	}
	if math.IsNaN(c.DiskOvercommit) || c.DiskOvercommit <= 0 || c.DiskOvercommit > maxDiskOvercommit {
		errs = append(errs, fmt.Errorf("disk_overcommit %v: want a ratio above 0 and at most %d (1 = never grant more disk than the state dir's file system has)", c.DiskOvercommit, maxDiskOvercommit))
	}
	if c.CreatesPerCaller < 0 || c.CreatesPerCaller > maxCreatesPerCaller {
		errs = append(errs, fmt.Errorf("creates_per_caller %d: want 1 to %d, or 0 for the backend's default", c.CreatesPerCaller, maxCreatesPerCaller))
	}
	return errs
}

// kubernetesCreatesPerCaller is the default on the Kubernetes backend,
// where a create mostly waits for the cluster to schedule and start a pod.
const kubernetesCreatesPerCaller = 64

// EffectiveCreatesPerCaller is CreatesPerCaller, or when that is 0 the
// default: on the local backend one per CPU (at least 2), since a create
// there is mostly this host's CPU and more at once only share it (100
// creates at once take as long in all, and another caller's create waits
// for every one in flight); on Kubernetes kubernetesCreatesPerCaller.
func (c Config) EffectiveCreatesPerCaller() int {
	switch {
	case c.CreatesPerCaller > 0:
		return c.CreatesPerCaller
	case c.Backend == BackendKubernetes:
		return kubernetesCreatesPerCaller
	}
	return max(2, goruntime.NumCPU())
}
