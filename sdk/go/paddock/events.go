package paddock

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/paddock-dev/paddock/api"
)

// EventStream follows the sandboxes the caller may see (GET /v1/events);
// call Close when done.
type EventStream struct {
	body io.ReadCloser
	r    *eventReader
	// Sandboxes is the stream's sync: every sandbox the caller could see
	// when it opened. Changes come from Next.
	Sandboxes []api.Sandbox
}

// Events opens the event stream and returns once its sync has come. With
// usage, Next also returns a usage sample every api.UsageInterval.
func (c *Client) Events(ctx context.Context, usage bool) (*EventStream, error) {
	q := url.Values{}
	if usage {
		q.Set("usage", "true")
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/v1/events", query: q, accept: "application/x-ndjson"})
	if err != nil {
		return nil, err
	}
	s := &EventStream{body: resp.Body, r: newEventReader(resp.Body, MaxEventLine)}
	var ev api.Event
	if err := s.r.next(&ev); err != nil {
		resp.Body.Close()
		if err == io.EOF {
			err = fmt.Errorf("event stream ended before its sync: %w", ErrUnavailable)
		}
		return nil, err
	}
	if ev.Type != api.StreamSync {
		resp.Body.Close()
		return nil, fmt.Errorf("event stream: daemon sent %q before its sync: %w", ev.Type, ErrUnavailable)
	}
	s.Sandboxes = ev.Sandboxes
	return s, nil
}

// Next blocks for the next event (a change, a usage sample or a ping).
// After a "lagged" event the stream has ended: open a new one, whose sync
// is the whole truth. A stream cut short is an error wrapping
// ErrUnavailable.
func (s *EventStream) Next() (api.Event, error) {
	var ev api.Event
	err := s.r.next(&ev)
	if err == io.EOF {
		return ev, fmt.Errorf("event stream ended: %w", ErrUnavailable)
	}
	return ev, err
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }
