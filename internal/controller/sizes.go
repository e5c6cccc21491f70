package controller

import (
	"fmt"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/controller/admission"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// sizeResources turns a create's size and resources into the sandbox's
// resources: the preset's fields (admission.WithSize), overridden by any
// non-zero field the caller gave, then the daemon's defaults for what is
// still unset. A preset beyond what this host allows is refused with the
// numbers, like a custom value; it is never reduced.
func (c *Controller) sizeResources(size string, req api.Resources) (api.Resources, error) {
	r := req
	if size == "" {
		if why := admission.ExceedsHost(r, c.cfg.Max); why != "" {
			return r, fmt.Errorf("%s: %w", why, errdefs.ErrResourceExhausted)
		}
		return resolveResources(r, c.cfg.Defaults, c.cfg.Max)
	}
	r, err := admission.WithSize(size, req)
	if err != nil {
		return api.Resources{}, err
	}
	if why := admission.ExceedsHost(r, c.cfg.Max); why != "" {
		return r, fmt.Errorf("size %s: %s: %w", size, why, errdefs.ErrResourceExhausted)
	}
	return resolveResources(r, c.cfg.Defaults, c.cfg.Max)
}
