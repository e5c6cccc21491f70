package config

import (
	"fmt"
	"math"
	"strconv"
)

// Bounds on the limits below, so a typo cannot switch a protection off.
const (
	minRequestBodyMemory = 16 << 20
	maxDiskOvercommit    = 100
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
	return errs
}
