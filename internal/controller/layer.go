package controller

import (
	"context"
	"fmt"
	"io"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/runtime"
)

// ExportLayer writes the sandbox's writable layer (its changes against the
// image) as a tar stream. It works on running and stopped sandboxes.
func (c *Controller) ExportLayer(ctx context.Context, ref string, w io.Writer) error {
	rec, err := c.resolve(ctx, ref)
	if err != nil {
		return err
	}
	b, err := c.backend(rec.Runtime)
	if err != nil {
		return err
	}
	x, ok := b.(runtime.LayerExporter)
	if !ok {
		return fmt.Errorf("%s cannot export a writable layer: %w", c.runtimeDesc(rec.Runtime), errdefs.ErrFailedPrecondition)
	}
	c.touch(rec.ID)
	return x.ExportLayer(ctx, rec.ID, w)
}
