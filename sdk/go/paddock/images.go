package paddock

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/paddock-dev/paddock/api"
)

// Build event types.
const (
	BuildProgress = "progress"
	BuildLog      = "log"
	BuildDone     = "done"
	BuildError    = "error"
)

// Images lists the daemon's image store.
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	var list api.ImageList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/images"}, &list); err != nil {
		return nil, err
	}
	return list.Images, nil
}

// BuildImage builds (or rebuilds) a named image, calling progress (when
// non-nil) with every event as it arrives, and returns the built image.
func (c *Client) BuildImage(ctx context.Context, name string, progress func(api.BuildEvent)) (*api.Image, error) {
	return c.buildImage(ctx, name, false, progress)
}

// EnsureImage builds a built-in image only if it is not built yet,
// reporting progress like BuildImage; an image already built returns at once.
func (c *Client) EnsureImage(ctx context.Context, name string, progress func(api.BuildEvent)) (*api.Image, error) {
	return c.buildImage(ctx, name, true, progress)
}

func (c *Client) buildImage(ctx context.Context, name string, ifMissing bool, progress func(api.BuildEvent)) (*api.Image, error) {
	e, err := escapeRef("image name", name)
	if err != nil {
		return nil, err
	}
	req := request{method: http.MethodPost, path: "/v1/images/" + e + "/build", accept: "application/x-ndjson"}
	if ifMissing {
		req.query = url.Values{"if_missing": {"true"}}
	}
	resp, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	img, err := readBuildStream(resp.Body, progress)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	return img, nil
}

func readBuildStream(r io.Reader, progress func(api.BuildEvent)) (*api.Image, error) {
	er := newEventReader(r, MaxEventLine)
	for {
		var ev api.BuildEvent
		if err := er.nextOrEnd(&ev, "image build", "done"); err != nil {
			return nil, err
		}
		ev.Message = sanitize(ev.Message)
		if progress != nil {
			progress(ev)
		}
		switch ev.Type {
		case BuildError:
			if ev.Error == nil {
				return nil, &APIError{Status: http.StatusOK, Code: "internal", Message: ev.Message}
			}
			return nil, streamError(ev.Error)
		case BuildDone:
			if ev.Image == nil {
				return nil, fmt.Errorf("image build: done event carries no image: %w", ErrUnavailable)
			}
			return ev.Image, nil
		}
	}
}
