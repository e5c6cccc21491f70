package store

import (
	"context"
	"time"
)

// Preview is one exposed port of a sandbox. Only a hash of its token is
// kept, so a leaked database does not leak working preview URLs.
type Preview struct {
	SandboxID string
	Port      int
	TokenHash []byte // sha256 of the token
	CreatedAt time.Time
}

// PreviewStore keeps exposed ports. Errors wrap errdefs sentinels:
// ErrNotFound for a missing sandbox or preview, ErrInvalidArgument for a
// record that fails validation.
type PreviewStore interface {
	// PutPreview exposes p.Port of p.SandboxID, replacing an earlier token
	// for the same port. A zero CreatedAt becomes now.
	PutPreview(ctx context.Context, p *Preview) error
	// GetPreview finds the preview of one port.
	GetPreview(ctx context.Context, sandboxID string, port int) (*Preview, error)
	// ListPreviews lists a sandbox's previews by port.
	ListPreviews(ctx context.Context, sandboxID string) ([]*Preview, error)
	// DeletePreview revokes one port's token.
	DeletePreview(ctx context.Context, sandboxID string, port int) error
}
