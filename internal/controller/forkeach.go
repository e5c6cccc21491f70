package controller

import (
	"context"

	"github.com/paddock-dev/paddock/api"
)

// ForkCopyFunc adjusts the create request of copy i (from 0) of a fork of
// src, the source as it was when the fork's snapshot was taken. The
// request's Labels are the copy's own map. FromSnapshot must be left as it
// is; everything else a create takes may be changed.
type ForkCopyFunc func(src *api.Sandbox, i int, req *api.CreateSandboxRequest)

// ForkEach is Fork with a say in each copy: a front end whose sandboxes
// carry per-sandbox secrets in their labels (E2B's access tokens), or
// whose forks keep settings Fork does not copy (the network, a lifetime),
// sets them per copy before the copy is created, so no copy ever runs
// with the source's.
func (c *Controller) ForkEach(ctx context.Context, ref string, req api.ForkRequest, each ForkCopyFunc) (*api.ForkResult, error) {
	return c.fork(ctx, ref, req, each)
}
