package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/errdefs"
)

// flight is one build in progress. Every caller waiting on it is a waiter;
// the build is cancelled only when the last waiter gives up, so one impatient
// caller cannot spoil a build that others still want.
type flight struct {
	name    string
	force   bool // Build: rebuild even if another process built it meanwhile
	cancel  context.CancelFunc
	done    chan struct{}
	img     *Image
	err     error
	waiters map[*waiter]struct{} // guarded by Store.mu
}

type waiter struct{ progress Progress }

// join adds a waiter; s.mu must be held.
func (f *flight) join(p Progress) *waiter {
	w := &waiter{progress: p}
	f.waiters[w] = struct{}{}
	return w
}

// startLocked begins a build of name with one waiter; s.mu must be held.
func (s *Store) startLocked(name string, force bool, p Progress) (*flight, *waiter) {
	// The build runs on its own context: it belongs to all its waiters,
	// not to the request that happened to start it.
	ctx, cancel := context.WithCancel(context.Background())
	f := &flight{name: name, force: force, cancel: cancel, done: make(chan struct{}), waiters: make(map[*waiter]struct{})}
	w := f.join(p)
	s.flights[name] = f
	s.active[f] = struct{}{}
	go func() {
		defer cancel()
		img, err := s.runBuild(ctx, name, f)
		s.mu.Lock()
		f.img, f.err = img, err
		if s.flights[name] == f {
			delete(s.flights, name)
		}
		delete(s.active, f)
		s.mu.Unlock()
		close(f.done)
	}()
	return f, w
}

// Close stops every build in progress, including those nobody waits for
// any more, and waits until each has ended and cleared its directory, or
// until ctx ends. Builds asked for afterwards fail. The daemon calls it on
// its way out, so a graceful stop leaves no builder running.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	var done []chan struct{}
	for f := range s.active {
		f.cancel()
		done = append(done, f.done)
	}
	s.mu.Unlock()
	for _, d := range done {
		select {
		case <-d:
		case <-ctx.Done():
			return fmt.Errorf("image store: waiting for builds to stop: %w", ctx.Err())
		}
	}
	return nil
}

// errClosed is what a build asked of a closed store gets.
var errClosed = fmt.Errorf("image store is shutting down: %w", errdefs.ErrUnavailable)

// wait blocks until f finishes or ctx ends; leaving early withdraws w and
// cancels the build if nobody else waits for it.
func (s *Store) wait(ctx context.Context, f *flight, w *waiter) (*Image, error) {
	select {
	case <-f.done:
		s.mu.Lock()
		delete(f.waiters, w)
		s.mu.Unlock()
		if f.err != nil {
			return nil, f.err
		}
		img := *f.img
		img.Layers = append([]string(nil), f.img.Layers...)
		return &img, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(f.waiters, w)
		if len(f.waiters) == 0 {
			f.cancel()
			// A later caller must start afresh, not join a build that
			// is being torn down.
			if s.flights[f.name] == f {
				delete(s.flights, f.name)
			}
		}
		s.mu.Unlock()
		return nil, fmt.Errorf("waiting for image %q build: %w", f.name, ctx.Err())
	}
}

// emit sends a progress line to every current waiter.
func (s *Store) emit(f *flight, line string) {
	s.mu.Lock()
	ps := make([]Progress, 0, len(f.waiters))
	for w := range f.waiters {
		if w.progress != nil {
			ps = append(ps, w.progress)
		}
	}
	s.mu.Unlock()
	// Called outside the lock: a slow or re-entrant callback must not
	// stall the store.
	for _, p := range ps {
		p(line)
	}
}

// runBuild fills a private directory under tmp/ and commits it. Whatever
// happens, the directory is gone afterwards.
func (s *Store) runBuild(ctx context.Context, name string, f *flight) (img *Image, err error) {
	build := s.builders[name]
	log := s.log.With("op", "build", "image", name)
	// Other processes may share this store (several daemons, tests): hold
	// the store's build lock shared (so none of them clears tmp/ under us)
	// and the name's lock exclusively (so one of them builds it, once).
	unlockBuilds, err := flockWait(ctx, filepath.Join(s.dir, "builds.lock"), false)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", name, err)
	}
	defer unlockBuilds()
	unlockName, err := flockWait(ctx, filepath.Join(s.dir, "build-"+name+".lock"), true)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", name, err)
	}
	defer unlockName()
	if !f.force {
		if img, err := s.resolveName(name); err == nil {
			return img, nil // another process built it while we waited
		}
	}
	start := time.Now()
	work, err := newWorkDir(s.tmpDir())
	if err != nil {
		return nil, fmt.Errorf("image %q: creating build directory: %w", name, err)
	}
	defer func() {
		// A builder's stragglers may still be dying; clearBuildDir waits
		// for them (recover.go).
		if _, rerr := clearBuildDir(work); rerr != nil {
			log.Error("build directory left behind", "dir", work, "err", rerr)
		}
	}()
	progress := func(line string) { s.emit(f, line) }
	progress(fmt.Sprintf("building image %s", name))
	if err := build(ctx, work+"/rootfs", progress); err != nil {
		if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		log.Warn("build failed", "err", err, "elapsed", time.Since(start))
		return nil, err
	}
	img, err = s.commit(ctx, name, work)
	if err != nil {
		log.Warn("build failed", "err", err, "elapsed", time.Since(start))
		return nil, err
	}
	log.Info("image built", "digest", img.Digest, "size", img.SizeBytes, "elapsed", time.Since(start).Round(time.Millisecond))
	progress(fmt.Sprintf("built image %s %s in %s", name, img.Digest, time.Since(start).Round(100*time.Millisecond)))
	return img, nil
}

// flockWait takes an flock on path (exclusive or shared), polling so that
// ctx can end the wait. The returned func releases it.
func flockWait(ctx context.Context, path string, exclusive bool) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", filepath.Base(path), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process's image build: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tryFlockExclusive takes an exclusive flock on path if nobody holds it.
func tryFlockExclusive(path string) (func(), bool) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
