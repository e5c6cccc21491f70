package paddock

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddock-dev/paddock/api"
)

// WatchOptions select what Watch reports.
type WatchOptions struct {
	// Path is the directory to watch (relative paths start at the user's home).
	Path      string
	Recursive bool
	// Include keeps only changes matching one of its globs; Exclude drops
	// changes matching one of its globs. A glob without "/" matches any
	// element of the relative path ("*.pyc", "node_modules"); one with "/"
	// matches the path or a leading part of it ("build/*").
	Include, Exclude []string
	// User is "user" (the default) or "root".
	User string
}

// Watcher follows a watch; call Close when done.
type Watcher struct {
	body io.ReadCloser
	r    *eventReader
	done bool
}

// Watch starts watching a directory in a sandbox. It returns once the watch
// is in place, so a missing directory is an error here (ErrNotFound).
func (c *Client) Watch(ctx context.Context, id string, o WatchOptions) (*Watcher, error) {
	p, err := sandboxPath(id, "/watch")
	if err != nil {
		return nil, err
	}
	q := url.Values{"path": {o.Path}}
	if o.Recursive {
		q.Set("recursive", strconv.FormatBool(true))
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	q["include"] = o.Include
	q["exclude"] = o.Exclude
	resp, err := c.send(ctx, request{method: http.MethodGet, path: p, query: q, accept: "application/x-ndjson"})
	if err != nil {
		return nil, err
	}
	w := &Watcher{body: resp.Body, r: newEventReader(resp.Body, 64<<10)}
	ev, err := w.next()
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	if ev.Type != api.WatchStart {
		resp.Body.Close()
		return nil, fmt.Errorf("watch: daemon sent %q before start: %w", ev.Type, ErrUnavailable)
	}
	return w, nil
}

func (w *Watcher) next() (api.WatchEvent, error) {
	var ev api.WatchEvent
	err := w.r.next(&ev)
	if err == io.EOF {
		return ev, fmt.Errorf("watch stream ended without an end event: %w", ErrUnavailable)
	}
	return ev, err
}

// Next blocks for the next change. When the watch ends cleanly (the
// sandbox stopped) it returns the end event once, then io.EOF. A broken
// watch is an error.
func (w *Watcher) Next() (api.WatchEvent, error) {
	if w.done {
		return api.WatchEvent{}, io.EOF
	}
	ev, err := w.next()
	if err != nil {
		return ev, err
	}
	switch ev.Type {
	case api.WatchEnd:
		w.done = true
	case api.WatchError:
		w.done = true
		if ev.Error != nil {
			return ev, streamError(ev.Error)
		}
		return ev, fmt.Errorf("watch failed: %w", ErrUnavailable)
	}
	return ev, nil
}

// Close ends the watch.
func (w *Watcher) Close() error { return w.body.Close() }
