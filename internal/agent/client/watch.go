package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
)

// WatchEvent is one filesystem change under a watched directory.
type WatchEvent struct {
	Type string // create, write, remove, rename, chmod
	Path string // relative to the watched directory
}

// WatchStream follows one directory watch.
type WatchStream struct {
	stream *connect.ServerStreamForClient[filesystem.WatchDirResponse]
	ctx    context.Context
}

// WatchDir starts watching dir (recursively if asked) as user and returns
// once the watch is in place, so a missing directory is an error here
// (wrapping errdefs.ErrNotFound), not later.
func (c *Client) WatchDir(ctx context.Context, dir, user string, recursive bool) (*WatchStream, error) {
	req := connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: recursive})
	SetUser(req.Header(), user)
	stream, err := c.Filesystem().WatchDir(ctx, req)
	if err != nil {
		return nil, rpcErr(ctx, "watch", err)
	}
	for stream.Receive() {
		if stream.Msg().GetStart() != nil {
			return &WatchStream{stream: stream, ctx: ctx}, nil
		}
	}
	err = stream.Err()
	_ = stream.Close()
	if err == nil {
		return nil, fmt.Errorf("watch: agent ended the stream before it started: %w", errdefs.ErrUnavailable)
	}
	return nil, rpcErr(ctx, "watch", err)
}

var eventNames = map[filesystem.EventType]string{
	filesystem.EventType_EVENT_TYPE_CREATE: "create",
	filesystem.EventType_EVENT_TYPE_WRITE:  "write",
	filesystem.EventType_EVENT_TYPE_REMOVE: "remove",
	filesystem.EventType_EVENT_TYPE_RENAME: "rename",
	filesystem.EventType_EVENT_TYPE_CHMOD:  "chmod",
}

// Next returns the next change, skipping keepalives. An error means the
// stream broke or ctx ended.
func (w *WatchStream) Next() (WatchEvent, error) {
	for w.stream.Receive() {
		fe := w.stream.Msg().GetFilesystem()
		if fe == nil {
			continue
		}
		name, ok := eventNames[fe.GetType()]
		if !ok {
			continue
		}
		return WatchEvent{Type: name, Path: fe.GetName()}, nil
	}
	err := w.stream.Err()
	if err == nil {
		return WatchEvent{}, fmt.Errorf("watch stream ended: %w", errdefs.ErrUnavailable)
	}
	return WatchEvent{}, rpcErr(w.ctx, "watch", err)
}

// Close ends the watch.
func (w *WatchStream) Close() error { return w.stream.Close() }
