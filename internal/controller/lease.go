package controller

import (
	"context"
	"fmt"
)

// leaseLayers holds the stored layers a new sandbox will stack (its
// snapshot's chain, or its template's) from before its record is written
// until create returns. After that its record names them, and the
// collector keeps every layer a sandbox record names until the sandbox is
// destroyed, for as long as its overlay uses them. The collector skips a
// held layer even if it read the records before this sandbox's was
// written, so a snapshot deleted and collected during the create cannot
// take a layer from under it. A snapshot's layers are also checked
// against their seals (snapshot.Store.CheckLayer); a layer gone or
// damaged fails the create before anything is recorded. A memory
// snapshot's image is held the same way (holdMemory).
func (c *Controller) leaseLayers(ctx context.Context, plan *restorePlan, tp *templatePlan) (release func(), err error) {
	release, err = c.holdLayers(ctx, plan, tp)
	if err != nil || plan == nil || plan.snap == nil || plan.snap.Memory == nil {
		return release, err
	}
	// Its memory image too, until the restore has read it.
	releaseLayers, releaseMemory := release, c.holdMemory(plan.snap.ID) // memsnapshot.go
	return func() { releaseMemory(); releaseLayers() }, nil
}

// holdLayers is leaseLayers for the stored layers alone.
func (c *Controller) holdLayers(ctx context.Context, plan *restorePlan, tp *templatePlan) (release func(), err error) {
	var layers, check []string
	if plan != nil && plan.snap != nil {
		for _, l := range plan.snap.Layers {
			check = append(check, l.Digest)
		}
		layers = append(layers, check...)
	}
	if tp != nil {
		layers = append(layers, tp.layers...)
	}
	if len(layers) == 0 {
		return func() {}, nil
	}
	ss, err := c.snapStore()
	if err != nil {
		return nil, err
	}
	release, err = ss.Hold(layers...)
	if err != nil {
		if plan != nil && plan.snap != nil {
			return nil, fmt.Errorf("cannot restore snapshot %s: %w", plan.snap.ID, err)
		}
		return nil, err
	}
	for _, d := range check {
		if err := ss.CheckLayer(ctx, d); err != nil {
			release()
			return nil, fmt.Errorf("cannot restore snapshot %s: %w", plan.snap.ID, err)
		}
	}
	return release, nil
}
