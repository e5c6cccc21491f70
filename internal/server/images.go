package server

import (
	"context"
	"net/http"

	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/internal/errdefs"
	"github.com/paddock-dev/paddock/internal/image"
)

func toAPIImage(i *image.Image) *api.Image {
	out := &api.Image{Name: i.Name, Digest: i.Digest, SizeBytes: i.SizeBytes, CreatedAt: i.CreatedAt}
	imageExtras(out, i) // imageimport.go
	return out
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	imgs, err := s.opts.Images.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := api.ImageList{Images: make([]api.Image, 0, len(imgs))}
	for _, i := range imgs {
		out.Images = append(out.Images, *toAPIImage(i))
	}
	writeJSON(w, http.StatusOK, out)
}

// buildImage streams a build's progress. The build goes on when the client
// goes away (a half-built image is never kept either way).
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	known := false
	for _, b := range image.Builtin() {
		known = known || b == name
	}
	if !known {
		writeError(w, errdefs.Invalid("image %q cannot be built here; built-in images are %v", name, image.Builtin()))
		return
	}
	ifMissing := r.URL.Query().Get("if_missing") == "true"
	out := newNDJSON(w)
	lines := make(chan string, 256)
	type result struct {
		img *image.Image
		err error
	}
	done := make(chan result, 1)
	go func() {
		progress := func(line string) {
			select {
			case lines <- line:
			default: // a slow client loses progress lines, never stalls the build
			}
		}
		ctx := context.WithoutCancel(r.Context())
		var img *image.Image
		var err error
		if ifMissing {
			img, err = s.opts.Images.Ensure(ctx, name, progress)
		} else {
			img, err = s.opts.Images.Build(ctx, name, progress)
		}
		done <- result{img, err}
	}()
	for {
		select {
		case line := <-lines:
			_ = out.send(api.BuildEvent{Type: "progress", Message: line})
		case res := <-done:
			for len(lines) > 0 {
				_ = out.send(api.BuildEvent{Type: "progress", Message: <-lines})
			}
			if res.err != nil {
				_ = out.send(api.BuildEvent{Type: "error", Error: &api.Error{Code: errdefs.Code(res.err), Message: res.err.Error()}})
				return
			}
			_ = out.send(api.BuildEvent{Type: "done", Image: toAPIImage(res.img)})
			return
		}
	}
}
