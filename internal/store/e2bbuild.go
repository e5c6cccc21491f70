package store

import (
	"context"
	"time"
)

// E2BBuild is one template build asked for through E2B's API, as its
// status call reports it, kept so that a client polling a build across a
// daemon restart learns how it ended instead of "not found". Its log
// lines and uploads are not kept.
type E2BBuild struct {
	ID    string // E2B's build id (a UUID)
	Owner string // the API key that asked for it
	Name  string // the template's name
	Tags  []string
	// Status is E2B's: waiting, building, ready or error.
	Status string
	// Reason and Step say why an error build failed, and where.
	Reason, Step string
	CreatedAt    time.Time
	FinishedAt   time.Time // zero until it ends
}

// E2BBuildStore keeps E2B template builds. Errors wrap errdefs sentinels:
// ErrNotFound for a missing build, ErrInvalidArgument for a record that
// fails validation.
type E2BBuildStore interface {
	// PutE2BBuild inserts or replaces the build b.ID.
	PutE2BBuild(ctx context.Context, b *E2BBuild) error
	// GetE2BBuild finds the build id of the template name.
	GetE2BBuild(ctx context.Context, name, id string) (*E2BBuild, error)
	// PruneE2BBuilds removes the builds created before before, then the
	// oldest beyond keep, and returns how many went.
	PruneE2BBuilds(ctx context.Context, before time.Time, keep int) (int, error)
	// EndE2BBuilds marks every build still waiting or building as an
	// error with reason, at at: a daemon that starts finds the builds its
	// earlier run left unfinished.
	EndE2BBuilds(ctx context.Context, reason string, at time.Time) (int, error)
}
