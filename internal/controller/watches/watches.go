// Package watches is the controller's watches subsystem: a sandbox
// directory's changes streamed to a caller, filtered by include and
// exclude globs, ended by the sandbox's stop (a clean end) or a broken
// stream (an error). It reaches sandboxes through the controller's core
// (Core).
package watches

import (
	"context"
	"errors"
	"path"
	"strings"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/agent/client"
	"github.com/paddock-dev/paddock/internal/controller"
	"github.com/paddock-dev/paddock/internal/controller/rules"
	"github.com/paddock-dev/paddock/internal/errdefs"
)

// Bounds on one watch request.
const (
	maxWatchGlobs   = 32
	maxWatchGlobLen = 256
)

// Core is what the subsystem uses of the controller (*controller.Controller
// implements it).
type Core interface {
	// Agent reaches a sandbox ctx's caller may use, starting a stopped
	// one first; done ends the use.
	Agent(ctx context.Context, ref string) (ag *client.Client, id string, done func(), err error)
	// Get finds a sandbox ctx's caller may see.
	Get(ctx context.Context, ref string) (*api.Sandbox, error)
}

var _ Core = (*controller.Controller)(nil)

// Service serves watches.
type Service struct{ core Core }

// New returns the subsystem.
func New(core Core) *Service { return &Service{core: core} }

// Options select what a watch reports.
type Options struct {
	Path      string
	User      string
	Recursive bool
	// Include, when set, keeps only changes matching one of its globs;
	// Exclude drops changes matching one of its globs. See MatchGlob.
	Include, Exclude []string
}

func validateWatch(o *Options) error {
	if o.Path == "" {
		return errdefs.Invalid("path is required: the directory to watch")
	}
	if len(o.Path) > 4096 || strings.IndexByte(o.Path, 0) >= 0 {
		return errdefs.Invalid("path is not a valid path")
	}
	if o.User != "" && !rules.ValidUser(o.User) {
		return errdefs.Invalid("user %q is not a valid user name", o.User)
	}
	if len(o.Include)+len(o.Exclude) > maxWatchGlobs {
		return errdefs.Invalid("at most %d include and exclude globs", maxWatchGlobs)
	}
	for _, g := range append(append([]string(nil), o.Include...), o.Exclude...) {
		if g == "" || len(g) > maxWatchGlobLen {
			return errdefs.Invalid("glob %q must be 1 to %d bytes", g, maxWatchGlobLen)
		}
		if _, err := path.Match(g, ""); err != nil {
			return errdefs.Invalid("glob %q is malformed: %v", g, err)
		}
	}
	return nil
}

// MatchGlob reports whether rel (a slash-separated path relative to the
// watched directory) matches glob. A glob without a slash is matched
// against every element of rel, so "*.pyc" matches "a/b.pyc" and
// "node_modules" matches everything under any node_modules directory; a
// glob with a slash is matched against rel and each of its leading
// directories, so "build/*" matches "build/x/y".
func MatchGlob(glob, rel string) bool {
	if !strings.Contains(glob, "/") {
		for _, el := range strings.Split(rel, "/") {
			if ok, _ := path.Match(glob, el); ok {
				return true
			}
		}
		return false
	}
	p := rel
	for {
		if ok, _ := path.Match(glob, p); ok {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

func keepWatched(o *Options, rel string) bool {
	for _, g := range o.Exclude {
		if MatchGlob(g, rel) {
			return false
		}
	}
	if len(o.Include) == 0 {
		return true
	}
	for _, g := range o.Include {
		if MatchGlob(g, rel) {
			return true
		}
	}
	return false
}

// Watch streams changes under a directory of a sandbox until ctx ends or
// the sandbox stops. The stream starts with a start event and, unless the
// caller goes away, ends with an end event (the sandbox stopped) or an
// error event. Watch returns an error only when nothing was emitted (bad
// request, missing sandbox or directory), so the caller can answer with a
// status. A watch does not keep a sandbox awake: it may still stop when idle.
func (s *Service) Watch(ctx context.Context, ref string, o Options, emit func(api.WatchEvent) error) error {
	if err := validateWatch(&o); err != nil {
		return err
	}
	ag, id, done, err := s.core.Agent(ctx, ref)
	if err != nil {
		return err
	}
	ws, err := ag.WatchDir(ctx, o.Path, o.User, o.Recursive)
	done()
	if err != nil {
		return err
	}
	defer ws.Close()
	if err := emit(api.WatchEvent{Type: api.WatchStart}); err != nil {
		return nil
	}
	for {
		ev, err := ws.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			_ = emit(s.watchEnd(context.WithoutCancel(ctx), id, err))
			return nil
		}
		rel := strings.TrimPrefix(ev.Path, "./")
		if !keepWatched(&o, rel) {
			continue
		}
		if err := emit(api.WatchEvent{Type: ev.Type, Path: rel}); err != nil {
			return nil
		}
	}
}

// watchEnd tells a stopped sandbox (a clean end) from a broken stream.
func (s *Service) watchEnd(ctx context.Context, id string, cause error) api.WatchEvent {
	rec, err := s.core.Get(ctx, id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return api.WatchEvent{Type: api.WatchEnd, Reason: "sandbox destroyed"}
	case err == nil && rec.State != api.StateRunning:
		return api.WatchEvent{Type: api.WatchEnd, Reason: "sandbox " + rec.State}
	}
	return api.WatchEvent{Type: api.WatchError, Error: &api.Error{Code: errdefs.Code(cause), Message: cause.Error()}}
}
