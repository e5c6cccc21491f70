package paddock

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/paddock-dev/paddock/api"
)

// ImportImage stores the image in a `docker save` archive or an OCI layout
// tarball read from r. source, if not empty, is recorded as where the
// image came from (default: the archive's tag) and can address it later.
// The returned image's Digest is what sandboxes should be created from.
func (c *Client) ImportImage(ctx context.Context, r io.Reader, source string) (*api.Image, error) {
	if r == nil {
		return nil, fmt.Errorf("nil reader: %w", ErrInvalidArgument)
	}
	q := url.Values{}
	if source != "" {
		q.Set("source", source)
	}
	var img api.Image
	req := request{method: http.MethodPost, path: "/v1/images/import", query: q, body: r, ctype: "application/x-tar"}
	if err := c.call(ctx, req, &img); err != nil {
		return nil, err
	}
	return &img, nil
}

// PullImage pulls ref from an OCI registry, reporting progress events
// (progress may be nil). The image is recorded under its manifest digest.
func (c *Client) PullImage(ctx context.Context, ref string, progress func(api.BuildEvent)) (*api.Image, error) {
	if ref == "" {
		return nil, fmt.Errorf("image reference is empty: %w", ErrInvalidArgument)
	}
	req := request{method: http.MethodPost, path: "/v1/images/pull", jsonBody: api.PullImageRequest{Ref: ref}, accept: "application/x-ndjson"}
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

// RemoveImage deletes an image's record (by digest, built-in name or
// source); one that a sandbox, snapshot or template uses is refused with
// ErrFailedPrecondition. With gc, unreferenced layers are deleted at once.
func (c *Client) RemoveImage(ctx context.Context, ref string, gc bool) (*api.RemoveImageResult, error) {
	if len(ref) > 512 {
		return nil, fmt.Errorf("image reference is too long: %w", ErrInvalidArgument)
	}
	if ref == "" || ref == "." || ref == ".." {
		return nil, fmt.Errorf("image reference %q is not valid: %w", ref, ErrInvalidArgument)
	}
	req := request{method: http.MethodDelete, path: "/v1/images/" + url.PathEscape(ref)}
	if gc {
		req.query = url.Values{"gc": {"true"}}
	}
	var out api.RemoveImageResult
	if err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GCImages deletes every image layer nothing references.
func (c *Client) GCImages(ctx context.Context) (*api.ImageGCResult, error) {
	var out api.ImageGCResult
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/images/gc"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExportImage writes the image ref, with Paddock's agent added as its
// entrypoint, to w as an OCI image layout archive (for `ctr images
// import` on a cluster's nodes or a registry's tools), named under prefix
// ("" is paddock.local). It returns the reference the archive names.
func (c *Client) ExportImage(ctx context.Context, ref, prefix string, w io.Writer) (string, error) {
	if len(ref) > 512 || ref == "" || ref == "." || ref == ".." {
		return "", fmt.Errorf("image reference %q is not valid: %w", ref, ErrInvalidArgument)
	}
	return c.exportOCI(ctx, "/v1/images/"+url.PathEscape(ref)+"/oci", "image "+ref, prefix, w)
}

// ExportTemplate writes the image a template's sandboxes run on the
// Kubernetes backend to w as ExportImage does: the template's base image,
// the files its build steps made, and Paddock's agent. A template without
// build steps exports its base image.
func (c *Client) ExportTemplate(ctx context.Context, name, prefix string, w io.Writer) (string, error) {
	n, err := templateSegment(name)
	if err != nil {
		return "", err
	}
	return c.exportOCI(ctx, "/v1/templates/"+n+"/oci", "template "+name, prefix, w)
}

func (c *Client) exportOCI(ctx context.Context, path, what, prefix string, w io.Writer) (string, error) {
	req := request{method: http.MethodGet, path: path, accept: "application/x-tar"}
	if prefix != "" {
		req.query = url.Values{"prefix": {prefix}}
	}
	resp, err := c.send(ctx, req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return "", fmt.Errorf("export %s: %w", what, err)
	}
	return resp.Header.Get("Paddock-Image-Ref"), nil
}
