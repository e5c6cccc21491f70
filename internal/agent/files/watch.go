package files

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	"github.com/paddock-dev/paddock/internal/agent/reply"
	"github.com/paddock-dev/paddock/internal/agent/safefs"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
)

// Bounds on watching: inotify watches are a per-user kernel resource, and
// polled watchers buffer events until a client collects them.
const (
	maxWatchers        = 256
	maxWatchDirs       = 8192
	maxPendingEvents   = 10_000
	watchKeepaliveTick = 30 * time.Second
)

// dirWatch is one watch over a directory (and, if recursive, its subtree).
type dirWatch struct {
	root         string
	recursive    bool
	includeEntry bool
	w            *fsnotify.Watcher
	dirs         int
	names        *idNames
}

func newDirWatch(s *Service, root string, recursive, includeEntry bool) (*dirWatch, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, safefs.Error("watch", root, err)
	}
	if !fi.IsDir() {
		return nil, errdefs.Invalid("%s is not a directory", root)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("cannot create a file watcher"+": %w", errdefs.ErrResourceExhausted)
	}
	d := &dirWatch{root: root, recursive: recursive, includeEntry: includeEntry, w: w, names: newIDNames(s.users)}
	if err := d.add(root); err != nil {
		_ = w.Close()
		return nil, err
	}
	return d, nil
}

func (d *dirWatch) add(dir string) error {
	if !d.recursive {
		d.dirs++
		if err := d.w.Add(dir); err != nil {
			return safefs.Error("watch", dir, err)
		}
		return nil
	}
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return safefs.Error("watch", p, err)
			}
			return nil
		}
		if !de.IsDir() {
			return nil
		}
		if d.dirs >= maxWatchDirs {
			return fmt.Errorf("too many directories to watch"+": %w", errdefs.ErrResourceExhausted)
		}
		d.dirs++
		if err := d.w.Add(p); err != nil && p == dir {
			return safefs.Error("watch", p, err)
		}
		return nil
	})
}

// convert turns an fsnotify event into envd's form; a new directory in a
// recursive watch is watched as well.
func (d *dirWatch) convert(ev fsnotify.Event) []*filesystem.FilesystemEvent {
	// One budget per batch: a new directory's existing entries are all
	// reported at once.
	d.names.limitMetadata()
	rel, err := filepath.Rel(d.root, ev.Name)
	if err != nil {
		rel = ev.Name
	}
	var out []*filesystem.FilesystemEvent
	emit := func(t filesystem.EventType) {
		fe := &filesystem.FilesystemEvent{Name: rel, Type: t}
		if d.includeEntry && t != filesystem.EventType_EVENT_TYPE_REMOVE && t != filesystem.EventType_EVENT_TYPE_RENAME {
			if e, err := entryInfo(ev.Name, d.names); err == nil {
				fe.Entry = e
			}
		}
		out = append(out, fe)
	}
	if ev.Has(fsnotify.Create) {
		emit(filesystem.EventType_EVENT_TYPE_CREATE)
		if d.recursive {
			if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
				_ = d.add(ev.Name)
				out = append(out, d.existing(ev.Name)...)
			}
		}
	}
	if ev.Has(fsnotify.Write) {
		emit(filesystem.EventType_EVENT_TYPE_WRITE)
	}
	if ev.Has(fsnotify.Remove) {
		emit(filesystem.EventType_EVENT_TYPE_REMOVE)
	}
	if ev.Has(fsnotify.Rename) {
		emit(filesystem.EventType_EVENT_TYPE_RENAME)
	}
	if ev.Has(fsnotify.Chmod) {
		emit(filesystem.EventType_EVENT_TYPE_CHMOD)
	}
	return out
}

func (s *Service) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	_, path, err := s.userPath(ctx, req.Msg.GetPath())
	if err != nil {
		return reply.RPC(err)
	}
	d, err := newDirWatch(s, path, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return reply.RPC(err)
	}
	defer d.w.Close()
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{
		Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	tick := time.NewTicker(watchKeepaliveTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{
				Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case ev, ok := <-d.w.Events:
			if !ok {
				return nil
			}
			for _, fe := range d.convert(ev) {
				if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
					return err
				}
			}
		case err, ok := <-d.w.Errors:
			if !ok {
				return nil
			}
			s.log.Debug("watch error", "path", path, "err", err)
		}
	}
}

// polledWatcher buffers events for GetWatcherEvents.
type polledWatcher struct {
	d       *dirWatch
	mu      sync.Mutex
	events  []*filesystem.FilesystemEvent
	dropped bool
	done    chan struct{}
}

type watcherTable struct {
	mu sync.Mutex
	m  map[string]*polledWatcher
}

func newWatcherTable() *watcherTable { return &watcherTable{m: make(map[string]*polledWatcher)} }

func (t *watcherTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, pw := range t.m {
		_ = pw.d.w.Close()
		<-pw.done
		delete(t.m, id)
	}
}

func (s *Service) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	_, path, err := s.userPath(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, reply.RPC(err)
	}
	t := s.watchers
	t.mu.Lock()
	n := len(t.m)
	t.mu.Unlock()
	if n >= maxWatchers {
		return nil, reply.RPC(fmt.Errorf("too many watchers; remove some first"+": %w", errdefs.ErrResourceExhausted))
	}
	d, err := newDirWatch(s, path, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, reply.RPC(err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	pw := &polledWatcher{d: d, done: make(chan struct{})}
	go func() {
		defer close(pw.done)
		for {
			select {
			case ev, ok := <-d.w.Events:
				if !ok {
					return
				}
				fes := d.convert(ev)
				pw.mu.Lock()
				if len(pw.events)+len(fes) > maxPendingEvents {
					pw.dropped = true
				} else {
					pw.events = append(pw.events, fes...)
				}
				pw.mu.Unlock()
			case _, ok := <-d.w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	t.mu.Lock()
	t.m[id] = pw
	t.mu.Unlock()
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: id}), nil
}

func (s *Service) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	t := s.watchers
	t.mu.Lock()
	pw, ok := t.m[req.Msg.GetWatcherId()]
	t.mu.Unlock()
	if !ok {
		return nil, reply.RPC(errdefs.NotFound("watcher %q", req.Msg.GetWatcherId()))
	}
	pw.mu.Lock()
	events, dropped := pw.events, pw.dropped
	pw.events, pw.dropped = nil, false
	pw.mu.Unlock()
	if dropped {
		return nil, reply.RPC(fmt.Errorf("events were dropped because they were not collected in time"+": %w", errdefs.ErrResourceExhausted))
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: events}), nil
}

func (s *Service) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	t := s.watchers
	t.mu.Lock()
	pw, ok := t.m[req.Msg.GetWatcherId()]
	delete(t.m, req.Msg.GetWatcherId())
	t.mu.Unlock()
	if !ok {
		return nil, reply.RPC(errdefs.NotFound("watcher %q", req.Msg.GetWatcherId()))
	}
	_ = pw.d.w.Close()
	<-pw.done
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}
