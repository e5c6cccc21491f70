package controller

import (
	"context"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/internal/runtime"
)

// maxReclaims bounds how many destroyed sandboxes have their files removed
// at once, so a burst of deletes does not turn into a burst of unmounts
// and unlinks competing with the creates that follow.
const maxReclaims = 4

// reclaimer removes the files of sandboxes whose compute is already gone.
// A delete returns once the container is dead and the record says
// destroyed; unmounting the writable layer and deleting the disk image
// (tens of milliseconds, more on a busy disk) happen here, afterwards.
// Nothing is lost if the daemon dies first: the files have no live record
// left, so reconcile removes them as orphans at the next start.
type reclaimer struct {
	once    sync.Once
	slots   chan struct{}
	pending sync.WaitGroup
}

// reclaimLater removes id's files in the background.
func (c *Controller) reclaimLater(b runtime.Backend, id string) {
	rc := &c.reaps
	rc.once.Do(func() { rc.slots = make(chan struct{}, maxReclaims) })
	rc.pending.Add(1)
	go func() {
		defer rc.pending.Done()
		rc.slots <- struct{}{}
		defer func() { <-rc.slots }()
		ctx, cancel := context.WithTimeout(System(context.Background()), teardownTimeout)
		defer cancel()
		if err := b.Destroy(ctx, id); err != nil {
			c.log.Error("remove destroyed sandbox's files; the next daemon start retries", "sandbox", id, "err", err)
		}
	}()
}

// waitReclaims waits, at most d, for background removals to finish.
func (c *Controller) waitReclaims(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		c.reaps.pending.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
