package runtime

import "context"

// Killer is implemented by backends whose teardown splits in two: Kill
// ends every process of a sandbox and removes its container at once, and
// a later Destroy removes its files (unmounting and deleting them is the
// slow part). A sandbox that was killed but not yet destroyed has no
// compute left, only files, which Destroy, and List for reconciliation,
// still find. Kill is idempotent.
type Killer interface {
	Kill(ctx context.Context, id string) error
}
